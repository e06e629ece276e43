import type pg from 'pg';
import { assertTenantSchema } from '#lib/db/executor';
import { NOT_TENANT_SCHEMAS } from '#lib/db/own-schemas';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { NotFound, ServiceUnavailable } from '#lib/errors';

/**
 * Drift: how a schema's structure differs from its template's (or any other schema's). Each
 * schema is read from the catalog as definitions keyed by kind and name (tables, columns with
 * their type, default and nullability, constraints, indexes, views, functions, triggers, enum
 * types, sequences, policies), with the schema's own name taken out of them, so two schemas of
 * one shape read the same. A fingerprint hashes them: a thousand schemas compared with their
 * templates in one catalog query. Read on the service's own connection (its search path is
 * pg_catalog alone), by PostgreSQL's deparsers: no tenant code runs, and a tenant's lock is
 * waited for 2 s at most.
 */

export interface Definition {
  kind: string;
  name: string;
  definition: string;
}

/**
 * The definitions of the schemas in `$1`, each line `(schema, kind, name, definition)`. `q` is the
 * schema's name as the deparsers qualify with it, `l` as a literal (a function's search path).
 */
const DEFINITIONS = `
  WITH s AS (
    SELECT n.oid, n.nspname, pg_catalog.quote_ident(n.nspname) || '.' AS q,
           pg_catalog.quote_literal(n.nspname) AS l
      FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY ($1::text[]))
  SELECT s.nspname AS schema, 'table' AS kind, c.relname::text AS name,
         c.relkind::text || ' ' || c.relpersistence::text || coalesce(' ' || pg_catalog.array_to_string(c.reloptions, ','), '') AS definition
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid WHERE c.relkind IN ('r', 'p')
  UNION ALL
  SELECT s.nspname, 'column', c.relname || '.' || a.attname,
         pg_catalog.replace(pg_catalog.format_type(a.atttypid, a.atttypmod), s.q, '')
         || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
         || coalesce(' DEFAULT ' || pg_catalog.replace(pg_catalog.pg_get_expr(d.adbin, d.adrelid), s.q, ''), '')
         || CASE a.attidentity WHEN 'a' THEN ' IDENTITY ALWAYS' WHEN 'd' THEN ' IDENTITY BY DEFAULT' ELSE '' END
         || CASE WHEN a.attgenerated = 's' THEN ' GENERATED' ELSE '' END
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind IN ('r', 'p')
    JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
  UNION ALL
  SELECT s.nspname, 'constraint', c.relname || '.' || k.conname,
         pg_catalog.replace(pg_catalog.pg_get_constraintdef(k.oid), s.q, '')
    FROM s JOIN pg_catalog.pg_constraint k ON k.connamespace = s.oid
    JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
  UNION ALL
  SELECT s.nspname, 'index', i.relname::text, pg_catalog.replace(pg_catalog.pg_get_indexdef(i.oid), s.q, '')
    FROM s JOIN pg_catalog.pg_class i ON i.relnamespace = s.oid AND i.relkind IN ('i', 'I')
   WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = i.oid AND k.contype IN ('p', 'u', 'x'))
  UNION ALL
  SELECT s.nspname, CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, c.relname::text,
         pg_catalog.replace(pg_catalog.pg_get_viewdef(c.oid), s.q, '')
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT s.nspname, 'function', pg_catalog.replace(p.oid::pg_catalog.regprocedure::text, s.q, ''),
         pg_catalog.md5(pg_catalog.replace(pg_catalog.replace(
           CASE WHEN p.prokind IN ('f', 'p') THEN pg_catalog.pg_get_functiondef(p.oid) ELSE p.prokind::text END,
           s.q, ''), s.l, '''@'''))
    FROM s JOIN pg_catalog.pg_proc p ON p.pronamespace = s.oid
  UNION ALL
  SELECT s.nspname, 'trigger', c.relname || '.' || t.tgname,
         pg_catalog.replace(pg_catalog.pg_get_triggerdef(t.oid), s.q, '') || ' ' || t.tgenabled::text
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT s.nspname, 'enum', t.typname::text,
         coalesce((SELECT pg_catalog.string_agg(pg_catalog.quote_literal(e.enumlabel::text), ', ' ORDER BY e.enumsortorder)
                     FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '')
    FROM s JOIN pg_catalog.pg_type t ON t.typnamespace = s.oid AND t.typtype = 'e'
  UNION ALL
  SELECT s.nspname, 'sequence', c.relname::text,
         pg_catalog.format_type(q.seqtypid, NULL) || ' ' || q.seqincrement || ' ' || q.seqmin || ' ' || q.seqmax
         || ' ' || q.seqstart || ' ' || q.seqcache || CASE WHEN q.seqcycle THEN ' CYCLE' ELSE '' END
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind = 'S'
    JOIN pg_catalog.pg_sequence q ON q.seqrelid = c.oid
  UNION ALL
  SELECT s.nspname, 'policy', c.relname || '.' || p.polname,
         p.polcmd::text || ' ' || p.polpermissive::text
         || coalesce(' USING ' || pg_catalog.replace(pg_catalog.pg_get_expr(p.polqual, p.polrelid), s.q, ''), '')
         || coalesce(' CHECK ' || pg_catalog.replace(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), s.q, ''), '')
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid
    JOIN pg_catalog.pg_policy p ON p.polrelid = c.oid`;

/**
 * What a deparser may meet when an object it reads is dropped under it by another session (a
 * tenant's DDL): the catalog row gone from its cache (XX000 "cache lookup failed"), its TOASTed
 * text gone (XX001), the object gone (42704, 42P01, 42883). Read again, it is simply not there.
 */
const DROPPED_MEANWHILE = new Set(['XX000', 'XX001', 'XX002', '42704', '42P01', '42883']);
const READS = 3;

/**
 * The catalog read, in a transaction whose lock waits are bounded (a tenant may hold a lock),
 * read again when an object was dropped while it was read; 503 should that keep happening.
 */
export async function readCatalog<T extends pg.QueryResultRow>(
  db: pg.Pool,
  text: string,
  values: unknown[],
): Promise<T[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTransaction(db, async (client) => (await client.query<T>(text, values)).rows, {
        lockTimeout: '2s',
      });
    } catch (error) {
      if (!isPgError(error) || !DROPPED_MEANWHILE.has(error.code)) throw error;
      if (attempt === READS) {
        throw new ServiceUnavailable(
          'Catalog changed',
          'schemas were changed while their structure was read, three times over; try again',
          error,
        );
      }
    }
  }
}

export interface Fingerprint {
  schema: string;
  fingerprint: string;
  objects: number;
  template: string | null;
  /** Whether it differs from its template: null without one (or when the template is gone). */
  drifted: boolean | null;
}

/**
 * Every tenant schema's fingerprint (those within `within`, when a person's scope narrows them),
 * and, for one cloned from a template, whether it still matches that template's.
 */
export async function fingerprints(
  db: pg.Pool,
  { within, template }: { within: readonly string[] | null; template?: string },
): Promise<{ schemas: Fingerprint[] }> {
  const targets = await readCatalog<{ schema: string; template: string | null }>(
    db,
    `SELECT n.nspname AS schema, t.template
       FROM pg_catalog.pg_namespace n LEFT JOIN _dbadmin.schema_templates t ON t.schema_name = n.nspname
      WHERE n.nspname !~ '^pg_' AND n.nspname <> ALL ($1::text[])
        AND ($2::text[] IS NULL OR n.nspname = ANY ($2::text[]))
        AND ($3::text IS NULL OR n.nspname = $3 OR t.template = $3)
      ORDER BY n.nspname`,
    [NOT_TENANT_SCHEMAS, within, template ?? null],
  );
  const wanted = [...new Set(targets.flatMap((t) => (t.template ? [t.schema, t.template] : [t.schema])))];
  const prints = new Map<string, { fingerprint: string; objects: number }>();
  for (let i = 0; i < wanted.length; i += PRINTS_AT_ONCE)
    for (const row of await printsOf(db, wanted.slice(i, i + PRINTS_AT_ONCE))) prints.set(row.schema, row);
  const schemas: Fingerprint[] = [];
  for (const { schema, template: from } of targets) {
    const own = prints.get(schema);
    // Dropped while it was read: it is no tenant any more.
    if (!own) continue;
    const theirs = from ? prints.get(from) : undefined;
    schemas.push({
      schema,
      ...own,
      template: from,
      drifted: theirs ? theirs.fingerprint !== own.fingerprint : null,
    });
  }
  return { schemas };
}

/** Schemas fingerprinted in one query: a few hundred, so one dropped meanwhile costs little to read again. */
const PRINTS_AT_ONCE = 250;

const PRINTS = `
  WITH lines AS (${DEFINITIONS})
  SELECT w.nspname AS schema,
         pg_catalog.md5(coalesce(pg_catalog.string_agg(l.kind || ' ' || l.name || ' ' || l.definition, E'\n'
                                   ORDER BY l.kind, l.name), '')) AS fingerprint,
         pg_catalog.count(l.kind)::int AS objects
    FROM pg_catalog.pg_namespace w LEFT JOIN lines l ON l.schema = w.nspname
   WHERE w.nspname = ANY ($1::text[]) GROUP BY w.nspname`;

/** One schema's fingerprint on the service's connection, read as the list's are (bounded, read again). */
export async function schemaFingerprint(db: pg.Pool, schema: string): Promise<string | undefined> {
  return (await printsOf(db, [schema]))[0]?.fingerprint;
}

/** One schema's fingerprint, read on `client`: in its transaction (a bundle's snapshot). */
export async function fingerprintOf(client: pg.ClientBase, schema: string): Promise<string> {
  const { rows } = await client.query<{ fingerprint: string }>(PRINTS, [[schema]]);
  return rows[0]?.fingerprint ?? '';
}

/**
 * The schemas' fingerprints. Should some schema keep changing while it is read (other sessions'
 * DDL, on a busy database), the schemas are read in halves, down to that one schema, which is
 * then left out rather than failing the others.
 */
async function printsOf(
  db: pg.Pool,
  schemas: string[],
): Promise<Array<{ schema: string; fingerprint: string; objects: number }>> {
  try {
    return await readCatalog(db, PRINTS, [schemas]);
  } catch (error) {
    if (!(error instanceof ServiceUnavailable)) throw error;
    if (schemas.length === 1) return [];
    const half = Math.ceil(schemas.length / 2);
    return [...(await printsOf(db, schemas.slice(0, half))), ...(await printsOf(db, schemas.slice(half)))];
  }
}

export interface Drift {
  schema: string;
  against: string;
  same: boolean;
  /** In `against`, not in `schema`. */
  missing: Definition[];
  /** In `schema`, not in `against`. */
  extra: Definition[];
  different: Array<{ kind: string; name: string; expected: string; actual: string }>;
}

/** How `schema` differs from `against` (by default its template), object by object. */
export async function drift(db: pg.Pool, schema: string, against: string | undefined): Promise<Drift> {
  assertTenantSchema(schema);
  if (against !== undefined) assertTenantSchema(against);
  const base = against ?? (await templateOf(db, schema));
  const rows = await readCatalog<Definition & { schema: string }>(db, DEFINITIONS, [[schema, base]]);
  const found = new Set(rows.map((row) => row.schema));
  for (const name of [schema, base])
    if (!found.has(name) && !(await schemaExists(db, name)))
      throw new NotFound('Schema not found', `schema "${name}" does not exist`);
  const key = (row: Definition) => `${row.kind}\u0000${row.name}`;
  const ours = new Map(rows.filter((r) => r.schema === schema).map((r) => [key(r), r]));
  const theirs = new Map(rows.filter((r) => r.schema === base).map((r) => [key(r), r]));
  const plain = ({ kind, name, definition }: Definition) => ({ kind, name, definition });
  const missing = [...theirs].filter(([k]) => !ours.has(k)).map(([, r]) => plain(r));
  const extra = [...ours].filter(([k]) => !theirs.has(k)).map(([, r]) => plain(r));
  const different = [...ours]
    .filter(([k, r]) => theirs.has(k) && theirs.get(k)?.definition !== r.definition)
    .map(([k, r]) => ({
      kind: r.kind,
      name: r.name,
      expected: theirs.get(k)?.definition ?? '',
      actual: r.definition,
    }));
  return {
    schema,
    against: base,
    same: missing.length + extra.length + different.length === 0,
    missing,
    extra,
    different,
  };
}

export async function templateOf(db: pg.Pool, schema: string): Promise<string> {
  const { rows } = await db.query<{ template: string }>(
    'SELECT template FROM _dbadmin.schema_templates WHERE schema_name = $1',
    [schema],
  );
  if (!rows[0]) {
    throw new NotFound(
      'No template',
      `schema "${schema}" was not cloned from a template; name the schema to compare with in "against"`,
    );
  }
  return rows[0].template;
}

async function schemaExists(db: pg.Pool, schema: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
  return rowCount === 1;
}
