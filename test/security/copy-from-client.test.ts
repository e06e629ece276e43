import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';

/**
 * `COPY ... FROM STDIN` asks the client for rows. Sent alone through the extended protocol (a
 * key's statement, a statement of the SQL editor's answer), PostgreSQL ignores the Sync sent with
 * it while it waits for them, so a refusal without a Sync of its own left the session waiting in
 * COPY for good: the request never answered, its transaction stayed open, its locks held, and a
 * key could take every session of its schema that way.
 */

afterAll(closePool);

/** The reply, or 'no answer' when none came in the time a request may take. */
const answered = (reply: Promise<Reply>) =>
  Promise.race([
    reply,
    new Promise<'no answer'>((resolve) => setTimeout(() => resolve('no answer'), 15_000).unref()),
  ]);

/** Sessions still inside a COPY on the table: what a request that did not answer leaves behind. */
const heldOn = (schema: string) =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE query ILIKE 'COPY items%' AND state = 'active' AND usename LIKE $1`,
      [`${schema}%`],
    );
    return rows[0].n as number;
  });

describe('COPY FROM STDIN sent as one statement', () => {
  let schema: string;
  let service: string;
  beforeAll(async () => {
    schema = await tenantSchema('copyin');
    service = (await createKey(schema, 'service_role')).key;
  });

  it('is refused for a service key with 400 naming the import routes, and leaves no session in COPY', async () => {
    const reply = await answered(
      call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql: 'COPY items FROM STDIN' },
        ...bearer(service),
      }),
    );

    expect(reply).not.toBe('no answer');
    expect((reply as Reply).status).toBe(400);
    expect((reply as Reply).body.message).toMatch(/import/);
    expect(await heldOn(schema)).toBe(0);
  }, 40_000);

  it('is refused in the SQL editor’s answer, statement by statement, and the script rolled back', async () => {
    const reply = await answered(
      call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql: "INSERT INTO items (name) VALUES ('x'); COPY items FROM STDIN", schema, maxRows: 100 },
      }),
    );

    expect(reply).not.toBe('no answer');
    expect((reply as Reply).status).toBe(400);
    expect(await heldOn(schema)).toBe(0);
    const left = await withAdminClient((c) => c.query(`SELECT count(*)::int AS n FROM "${schema}".items`));
    expect(left.rows[0].n).toBe(1);
  }, 40_000);
});
