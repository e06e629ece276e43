import pg from 'pg';
import { handler as health } from '#functions/health';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { logger } from '#lib/log';
import { call } from '#test/support/http';

/**
 * A database that does not store text as UTF-8 (SQL_ASCII keeps bytes: `length('é')` is 2,
 * `upper('é')` is 'é') works, but the operator is told, at start and by /api/health.
 */
const superuserUrl = process.env.DBADMIN_TEST_SUPERUSER_URL;
const serviceUrl = new URL(process.env.DATABASE_URL as string);
const ASCII_DATABASE = 'dbadmin_health_ascii';

async function asSuperuser(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** This file's own config and pools, on the database at `url`. */
async function useDatabase(url: URL): Promise<void> {
  await closePool();
  process.env.DATABASE_URL = url.toString();
  resetConfig();
}

afterEach(() => useDatabase(serviceUrl));

describe('GET /api/health', () => {
  it('answers ok with no warnings on a UTF-8 database', async () => {
    const reply = await call(health, { path: '/api/health', auth: null });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ status: 'ok', database: 'up', timestamp: expect.any(String) });
  });

  (superuserUrl ? it : it.skip)(
    'warns, in the answer and once in the log, when the database is not UTF-8',
    async () => {
      await asSuperuser(`DROP DATABASE IF EXISTS ${ASCII_DATABASE}`);
      await asSuperuser(
        `CREATE DATABASE ${ASCII_DATABASE} OWNER ${pg.escapeIdentifier(serviceUrl.username)} TEMPLATE template0
         ENCODING 'SQL_ASCII' LOCALE_PROVIDER libc LC_COLLATE 'C' LC_CTYPE 'C'`,
      );
      const ascii = new URL(serviceUrl);
      ascii.pathname = `/${ASCII_DATABASE}`;
      await useDatabase(ascii);
      const warn = jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
      try {
        const first = await call(health, { path: '/api/health', auth: null });
        const second = await call(health, { path: '/api/health', auth: null });

        expect(first.status).toBe(200);
        expect(first.body.warnings).toEqual([
          expect.stringMatching(/^the database stores text as SQL_ASCII, not UTF8/),
        ]);
        expect(first.text).not.toContain(ASCII_DATABASE); // public: the name is in the log only
        expect(second.body.warnings).toEqual(first.body.warnings);
        const logged = warn.mock.calls.filter(([message]) => message === 'database encoding');
        expect(logged).toEqual([
          ['database encoding', expect.objectContaining({ database: ASCII_DATABASE })],
        ]);
      } finally {
        warn.mockRestore();
        await useDatabase(serviceUrl);
        await asSuperuser(`DROP DATABASE IF EXISTS ${ASCII_DATABASE} WITH (FORCE)`);
      }
    },
  );
});
