import pg from 'pg';
import { z } from 'zod';
import { resetConfig } from '#lib/config';
import type { CatalogRead } from '#lib/db/catalog-read';
import { closePool } from '#lib/db/pool';
import { httpHandler } from '#lib/http/handler';
import { type Access, defineRoute } from '#lib/http/route';
import { inSchema } from '#lib/validation';
import { bearer, createKey } from '#test/security/tenant';
import { directUrl } from '#test/support/db';
import { ADMIN, call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * A route's catalog read travels with the request's sign-in read, in one statement, before the
 * credentials are judged (lib/http/authenticate). PostgreSQL must run it only for credentials that
 * are about to pass: never for a wrong password or key, never for an address the throttle blocks
 * (a right guess during the block would take longer than a wrong one, and tell itself apart), and
 * never for a key outside its schema or its rights.
 *
 * The probe read tells a listener each time it runs, and whether it ran inside the sign-in read
 * (the statement's text names sign_in_failures; the probe's own spells it in two pieces).
 */
const LIMIT = 3;
const CHANNEL = 'dbadmin_sign_in_probe';

const probe = (schema: string | null): CatalogRead<string> => ({
  name: 'test.sign-in-probe',
  text: `SELECT $1::text AS schema
           FROM pg_catalog.pg_notify('${CHANNEL}', $1::text OPERATOR(pg_catalog.||) CASE
                  WHEN pg_catalog.strpos(pg_catalog.current_query(), 'sign_in_' OPERATOR(pg_catalog.||) 'failures') OPERATOR(pg_catalog.>) 0
                  THEN ' with the sign-in read' ELSE ' alone' END)`,
  values: [schema ?? '(none)'],
  schema,
  decode: (row) => String(row?.schema),
});

const route = (path: string, access: Access, withSchema = true) =>
  defineRoute({
    method: 'GET',
    path,
    summary: 'probe',
    access,
    query: withSchema ? z.strictObject({ schema: inSchema }) : z.strictObject({}),
    response: z.object({ read: z.string() }),
    reads: ({ query }) => probe((query as { schema?: string }).schema ?? null),
    handler: async ({ read }) => ({ read }),
  });

const handler = httpHandler([
  route('/probe/read', 'read'),
  route('/probe/write', 'write'),
  route('/probe/admin', 'admin', false),
]);

const WRONG = { user: ADMIN.user, pass: 'guess' };
let listener: pg.Client;
const heard: string[] = [];
const saved = process.env.AUTH_MAX_FAILURES;

let schema: string;
let other: string;
let anon: string;
let service: string;

beforeAll(async () => {
  // Made before the limit drops: other test files' wrong guesses from 127.0.0.1 count too.
  [schema, other] = [await freshSchema('carry'), await freshSchema('carry')];
  anon = (await createKey(schema, 'anon')).key;
  service = (await createKey(schema, 'service_role')).key;
  process.env.AUTH_MAX_FAILURES = String(LIMIT);
  resetConfig();
  listener = new pg.Client({ connectionString: directUrl() });
  await listener.connect();
  listener.on('notification', ({ payload }) => heard.push(payload ?? ''));
  await listener.query(`LISTEN ${CHANNEL}`);
});
afterAll(async () => {
  process.env.AUTH_MAX_FAILURES = saved;
  resetConfig();
  await listener.end();
  await closePool();
});

/** The request's answer, and the probe's runs it caused (a notification arrives before the next reply). */
async function probed(request: Parameters<typeof call>[1]) {
  heard.length = 0;
  const reply = await call(handler, request);
  await listener.query('SELECT 1');
  return { status: reply.status, body: reply.body, runs: [...heard] };
}

describe('the sign-in read carries the catalog read only for credentials about to pass', () => {
  it("the admin's right password: one round trip, the handler gets the read", async () => {
    const reply = await probed({ path: '/probe/read', query: { schema }, sourceIp: '198.51.100.80' });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ read: schema });
    expect(reply.runs).toEqual([`${schema} with the sign-in read`]);
  });

  it('a wrong password never runs it', async () => {
    const reply = await probed({
      path: '/probe/read',
      query: { schema },
      auth: WRONG,
      sourceIp: '198.51.100.81',
    });

    expect(reply.status).toBe(401);
    expect(reply.runs).toEqual([]);
  });

  it('a blocked address never runs it, the right password or a valid key included', async () => {
    const sourceIp = '198.51.100.82';
    for (let i = 0; i < LIMIT; i++)
      await probed({ path: '/probe/read', query: { schema }, auth: WRONG, sourceIp });

    const right = await probed({ path: '/probe/read', query: { schema }, sourceIp });
    const wrong = await probed({ path: '/probe/read', query: { schema }, auth: WRONG, sourceIp });
    const key = await probed({ path: '/probe/read', query: { schema }, ...bearer(service), sourceIp });

    expect([right.status, wrong.status, key.status]).toEqual([429, 429, 429]);
    expect([...right.runs, ...wrong.runs, ...key.runs]).toEqual([]);
  });

  it('an unknown key never runs it', async () => {
    const reply = await probed({
      path: '/probe/read',
      query: { schema },
      ...bearer('0'.repeat(64)),
      sourceIp: '198.51.100.83',
    });

    expect(reply.status).toBe(401);
    expect(reply.runs).toEqual([]);
  });

  it('a key runs it in its own schema only, and for what its type may do', async () => {
    const asKey = (key: string, path: string, s: string) =>
      probed({ path, query: { schema: s }, ...bearer(key), sourceIp: '198.51.100.84' });

    const own = await asKey(anon, '/probe/read', schema);
    const elsewhere = await asKey(anon, '/probe/read', other);
    const anonWrites = await asKey(anon, '/probe/write', schema);
    const serviceWrites = await asKey(service, '/probe/write', schema);
    const admin = await probed({ path: '/probe/admin', ...bearer(service), sourceIp: '198.51.100.84' });

    expect(own).toMatchObject({ status: 200, runs: [`${schema} with the sign-in read`] });
    expect(elsewhere).toMatchObject({ status: 403, runs: [] });
    expect(anonWrites).toMatchObject({ status: 403, runs: [] });
    expect(serviceWrites).toMatchObject({ status: 200, runs: [`${schema} with the sign-in read`] });
    expect(admin).toMatchObject({ status: 403, runs: [] });
  });

  it("a key that leaves schema to default gets its own schema's read, in a round trip of its own", async () => {
    const reply = await probed({ path: '/probe/read', ...bearer(anon), sourceIp: '198.51.100.85' });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ read: schema });
    expect(reply.runs).toEqual([`${schema} alone`]);
  });

  it('a request whose query is not valid is answered 400 after sign-in, and runs nothing', async () => {
    const reply = await probed({
      path: '/probe/read',
      query: { schema, extra: '1' },
      sourceIp: '198.51.100.86',
    });

    expect(reply.status).toBe(400);
    expect(reply.runs).toEqual([]);
  });
});
