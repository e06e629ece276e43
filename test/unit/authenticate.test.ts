import { adminCredentials, adminMatches, presentedCredentials } from '#lib/http/authenticate';

const admin = adminCredentials('admin', 's3cret:with:colons');
const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;
/** What authentication does with a Basic header before the principal is set. */
const signIn = (header: string | undefined) => {
  const presented = presentedCredentials(header);
  if (presented.kind === 'basic' && !adminMatches(presented, admin)) throw new Error('Invalid credentials');
  return presented;
};

describe('presentedCredentials and adminMatches', () => {
  it('accepts the admin credentials, with colons in the password', () => {
    expect(signIn(basic('admin:s3cret:with:colons'))).toEqual({
      kind: 'basic',
      user: 'admin',
      pass: 's3cret:with:colons',
    });
  });

  it.each([
    ['a wrong password', basic('admin:wrong')],
    ['a wrong user', basic('root:s3cret:with:colons')],
    ['no colon at all', basic('admin')],
    ['an empty pair', basic(':')],
  ])('answers Invalid credentials for %s', (_, header) => {
    expect(() => signIn(header)).toThrow('Invalid credentials');
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['another scheme', 'Digest username="admin"'],
    ['Basic without credentials', 'Basic '],
    ['Basic with characters outside base64', 'Basic ***'],
  ])('answers Authentication required for %s', (_, header) => {
    expect(() => signIn(header)).toThrow('Authentication required');
  });

  it('passes a bearer token on, for the key lookup', () => {
    expect(signIn(`Bearer ${'a'.repeat(64)}`)).toEqual({
      kind: 'bearer',
      token: 'a'.repeat(64),
    });
  });

  it('sets a 401 status and a Basic challenge on failures', () => {
    try {
      signIn(undefined);
      throw new Error('expected a failure');
    } catch (error) {
      expect(error).toMatchObject({
        status: 401,
        title: 'Unauthorized',
        headers: { 'WWW-Authenticate': expect.stringMatching(/^Basic/) },
      });
    }
  });
});
