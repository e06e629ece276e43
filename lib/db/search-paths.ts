import type pg from 'pg';

/**
 * Which role (or database) names a schema in its default search path (`ALTER ROLE ... SET
 * search_path`), for refusing to make a schema that would land on it.
 *
 * Every tenant's login has such a setting (its own schema), so reading them all costs more with
 * every tenant. The process reads them all once, then only the rows written since: a catalog row's
 * `xmin` is the transaction that wrote it, and every row not yet visible to the last read was
 * written by a transaction at or after that read's snapshot xmin (its watermark). A row deleted
 * since is still remembered, so a name found is confirmed against the catalog itself. Reads of one
 * server follow one another (each from the last one's watermark: never an older answer over a
 * newer one), and a server started again (restored, failed over) is read in full.
 */

interface Remembered {
  /** The snapshot xmin of the last read. */
  watermark: bigint;
  /** When the server last started: another means another server, or one restored. */
  started: string;
  /** Each setting row (`database:role`) and the names its search path lists. */
  rows: Map<string, string[]>;
  /** How many of those rows name each name. */
  named: Map<string, number>;
}

/** By server and database (a process talks to one; the bench to two): the latest read, in turn. */
const reads = new Map<string, Promise<Remembered | undefined>>();

/** Past this many transactions since the last read, read everything again (age() wraps at 2^31). */
const REREAD_AFTER_XIDS = 1_000_000_000n;

const READ = `
  SELECT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text AS watermark,
         pg_catalog.pg_postmaster_start_time()::text AS started,
         pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text::bigint - $1::bigint AS since,
         coalesce((SELECT pg_catalog.json_agg(pg_catalog.json_build_array(
                            s.setdatabase::text || ':' || s.setrole::text, s.setconfig))
                     FROM pg_catalog.pg_db_role_setting s
                    WHERE $1::bigint IS NULL
                       OR pg_catalog.age(s.xmin) <= pg_catalog.age(($1::bigint % 4294967296)::text::xid)),
                  '[]') AS rows`;

/** The names a setting's search_path lists, unquoted (as the exact check below reads them). */
function pathNames(config: string[] | null): string[] {
  const setting = config?.find((entry) => entry.startsWith('search_path='));
  if (setting === undefined) return [];
  return setting.slice('search_path='.length).split(',').map(unquoted);
}

/** `part` without the spaces and double quotes at its ends (SQL's trim(both ' "' FROM part)). */
function unquoted(part: string): string {
  const trimmed = (c: string | undefined) => c === ' ' || c === '"';
  let [start, end] = [0, part.length];
  while (start < end && trimmed(part[start])) start++;
  while (end > start && trimmed(part[end - 1])) end--;
  return part.slice(start, end);
}

async function readSince(client: pg.ClientBase, since: Remembered | undefined): Promise<Remembered> {
  const { rows } = await client.query<{
    watermark: string;
    started: string;
    since: string | null;
    rows: Array<[string, string[] | null]>;
  }>(READ, [since?.watermark.toString() ?? null]);
  const row = rows[0];
  if (!row) throw new Error('the search path read answered no row');
  // Another server, one started again, or one whose transaction ids went back or ran far on
  // (counted in 64 bits): everything again.
  const distance = row.since === null ? undefined : BigInt(row.since);
  if (
    since &&
    (row.started !== since.started || distance === undefined || distance < 0n || distance > REREAD_AFTER_XIDS)
  )
    return readSince(client, undefined);
  const known = since ?? {
    watermark: 0n,
    started: row.started,
    rows: new Map<string, string[]>(),
    named: new Map<string, number>(),
  };
  for (const [key, config] of row.rows) {
    for (const name of known.rows.get(key) ?? []) known.named.set(name, (known.named.get(name) ?? 1) - 1);
    const names = pathNames(config);
    known.rows.set(key, names);
    for (const name of names) known.named.set(name, (known.named.get(name) ?? 0) + 1);
  }
  known.watermark = BigInt(row.watermark);
  return known;
}

/** The role whose default search path names `schema` (null: a database's own setting), if any. */
export async function searchPathNaming(
  client: pg.ClientBase,
  schema: string,
): Promise<{ role: string | null } | undefined> {
  const { host, port, database } = client as pg.ClientBase & { host: string; port: number; database: string };
  const server = `${host}:${port}/${database}`;
  const read = (reads.get(server) ?? Promise.resolve(undefined))
    .catch(() => undefined)
    .then((last) => readSince(client, last));
  reads.set(server, read);
  const known = await read;
  if (!known.named.get(schema)) return undefined;
  // Remembered rows may since be gone (a tenant deleted, a setting reset): the catalog decides,
  // and the next read is a full one.
  if (reads.get(server) === read) reads.set(server, Promise.resolve(undefined));
  const { rows } = await client.query<{ role: string | null }>(
    `SELECT r.rolname AS role FROM pg_db_role_setting s LEFT JOIN pg_roles r ON r.oid = s.setrole,
            unnest(s.setconfig) AS setting
      WHERE setting LIKE 'search\\_path=%'
        AND $1 = ANY (SELECT trim(both ' "' FROM part) FROM unnest(string_to_array(substr(setting, 13), ',')) AS part)`,
    [schema],
  );
  return rows[0];
}
