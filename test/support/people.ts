import { randomBytes } from 'node:crypto';
import { handler as people } from '#functions/people';
import { type Call, call } from '#test/support/http';

/** People for tests: added by the admin and signed in with a console session. */

type Handler = Parameters<typeof call>[0];
export const PASSWORD = 'correct horse battery staple';

export interface Signed {
  id: number;
  cookie: string;
  csrf: string;
  /** A request with the session's cookie (and its CSRF token, unless `csrf: false`). */
  as: (handler: Handler, request: Call, options?: { csrf?: boolean }) => ReturnType<typeof call>;
}

export async function addPerson(
  role: string,
  schemas: string[] | null,
  login = `p${randomBytes(5).toString('hex')}`,
) {
  const made = await call(people, {
    method: 'POST',
    path: '/api/people',
    body: { login, role, schemas, password: PASSWORD },
  });
  if (made.status !== 201) throw new Error(`person: ${made.text}`);
  return { login, id: made.body.person.id as number };
}

export async function signIn(login: string, password = PASSWORD): Promise<Signed> {
  const reply = await call(people, {
    method: 'POST',
    path: '/api/session',
    auth: null,
    body: { login, password },
  });
  if (reply.status !== 200) throw new Error(`sign-in: ${reply.text}`);
  const cookie = (reply.headers['set-cookie'] ?? '').split(';')[0] ?? '';
  const csrf = reply.body.csrfToken as string;
  return {
    id: reply.body.person.id,
    cookie,
    csrf,
    as: (handler, request, { csrf: withCsrf = true } = {}) =>
      call(handler, {
        ...request,
        auth: null,
        headers: { ...request.headers, cookie, ...(withCsrf ? { 'x-csrf-token': csrf } : {}) },
      }),
  };
}

/** A person of `role` (scoped to `scope`, or every schema), signed in. */
export async function person(role: string, scope: string[] | null) {
  const { login, id } = await addPerson(role, scope);
  return { ...(await signIn(login)), login, id };
}
