import { adminCredentials, authenticateHeader } from '#lib/http/authenticate';

const admin = adminCredentials('admin', 's3cret:with:colons');
const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;

describe('authenticateHeader', () => {
  it('accepts the admin credentials, with colons in the password', () => {
    expect(authenticateHeader(basic('admin:s3cret:with:colons'), admin)).toEqual({ kind: 'admin' });
  });

  it.each([
    ['a wrong password', basic('admin:wrong')],
    ['a wrong user', basic('root:s3cret:with:colons')],
    ['no colon at all', basic('admin')],
    ['an empty pair', basic(':')],
  ])('answers Invalid credentials for %s', (_, header) => {
    expect(() => authenticateHeader(header, admin)).toThrow('Invalid credentials');
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['another scheme', 'Digest username="admin"'],
    ['Basic without credentials', 'Basic '],
    ['Basic with characters outside base64', 'Basic ***'],
  ])('answers Authentication required for %s', (_, header) => {
    expect(() => authenticateHeader(header, admin)).toThrow('Authentication required');
  });

  it('passes a bearer token on, for the key lookup', () => {
    expect(authenticateHeader(`Bearer ${'a'.repeat(64)}`, admin)).toEqual({
      kind: 'bearer',
      token: 'a'.repeat(64),
    });
  });

  it('sets a 401 status and a Basic challenge on failures', () => {
    try {
      authenticateHeader(undefined, admin);
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
