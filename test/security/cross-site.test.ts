import { handler as license } from '#functions/license';
import { handler as query } from '#functions/query';
import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * Another site's page can make the admin's browser POST to dbadmin without asking first (a form,
 * or fetch in no-cors mode with a text/plain or type-less body), and the browser attaches the
 * Basic credentials it has cached for dbadmin. None of those requests can carry a JSON content
 * type, so every authenticated POST requires one.
 */

afterAll(closePool);

const forged = (contentType: string | undefined): Record<string, string> =>
  contentType ? { 'content-type': contentType } : {};

describe.each([
  ['a form', 'application/x-www-form-urlencoded'],
  ['a text/plain fetch', 'text/plain;charset=UTF-8'],
  ['a fetch of a type-less Blob', undefined],
  ['a multipart form', 'multipart/form-data; boundary=x'],
])('a forged cross-site POST, as %s', (_, contentType) => {
  it('cannot run SQL as the admin', async () => {
    const table = uniqueName('csrf');
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      headers: forged(contentType),
      body: JSON.stringify({ sql: `CREATE TABLE public.${table} (id int)`, runAs: 'admin' }),
    });

    expect(reply.status).toBe(415);
    const listed = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `SELECT to_regclass('public.${table}') AS t` },
    });
    expect(listed.body.rows).toEqual([{ t: null }]);
  });

  it('cannot create a schema', async () => {
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      headers: forged(contentType),
      body: JSON.stringify({ schemaName: uniqueName('csrf'), password: 'csrf-pass-1' }),
    });

    expect(reply.status).toBe(415);
  });

  it('cannot free the license’s deployment slot', async () => {
    const reply = await call(license, {
      method: 'POST',
      path: '/api/license/deactivate',
      headers: forged(contentType),
    });

    expect(reply.status).toBe(415);
  });
});
