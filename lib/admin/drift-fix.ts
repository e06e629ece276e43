import type pg from 'pg';
import { readCatalog, templateOf } from '#lib/admin/drift';
import { type PlannedStatement, planStatements } from '#lib/admin/migration-plan';
import { schemasNamedIn } from '#lib/admin/query-schema';
import { functionDdl, type Names } from '#lib/admin/schema-ddl';
import { assertSchemaExists } from '#lib/db/catalog';
import { assertTenantSchema } from '#lib/db/executor';
import { quoteCatalogName, quoteLiteral } from '#lib/db/identifiers';
import { NotFound } from '#lib/errors';

/**
 * The SQL that brings a drifted schema back in line with its template (or any schema): read from
 * the catalog on the service's own connection, as drift is (no tenant code runs), written with
 * names unqualified, as a migration takes them (lib/admin/migration-plan), and previewed with its
 * locks. Applied as a migration over that schema, as the schema's own role.
 *
 * What is written: tables, columns (added, dropped, their type, default and NOT NULL), constraints,
 * indexes, views and materialized views, triggers (and their enabled state), enum types (made, or
 * their missing labels added), sequences and functions. What is not (policies, an enum whose labels
 * were reordered or removed, identity and generated columns added, a function whose body names
 * its schema) is listed with why, to write by hand. Drops are listed as destructive: the rows of a
 * dropped table or column are gone.
 */

export interface DriftFix {
  schema: string;
  against: string;
  /** The statements, in the order they run: one migration's SQL. */
  sql: string;
  statements: PlannedStatement[];
  /** It drops a table, a column, a type or a sequence: rows go with them. */
  destructive: boolean;
  notWritten: Array<{ kind: string; name: string; why: string }>;
}

type Row = Record<string, string | boolean | string[] | null>;

/** Each schema's objects, `(schema, kind, key, table, name, def, extra)`, names raw, definitions unqualified. */
const OBJECTS = `
  WITH s AS (
    SELECT n.oid, n.nspname, pg_catalog.quote_ident(n.nspname) || '.' AS q
      FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY ($1::text[]))
  SELECT s.nspname AS schema, 'table' AS kind, c.relname::text AS "table", c.relname::text AS name,
         c.relpersistence::text AS def, NULL::text[] AS extra
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid WHERE c.relkind IN ('r', 'p')
  UNION ALL
  SELECT s.nspname, 'column', c.relname, a.attname,
         pg_catalog.replace(pg_catalog.format_type(a.atttypid, a.atttypmod), s.q, ''),
         ARRAY[a.attnotnull::text, pg_catalog.replace(pg_catalog.pg_get_expr(d.adbin, d.adrelid), s.q, ''),
               a.attidentity::text, a.attgenerated::text, a.attnum::text]
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind IN ('r', 'p')
    JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
  UNION ALL
  SELECT s.nspname, 'constraint', c.relname, k.conname,
         pg_catalog.replace(pg_catalog.pg_get_constraintdef(k.oid), s.q, ''), ARRAY[k.contype::text]
    FROM s JOIN pg_catalog.pg_constraint k ON k.connamespace = s.oid
    JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
  UNION ALL
  SELECT s.nspname, 'index', t.relname, i.relname, pg_catalog.replace(pg_catalog.pg_get_indexdef(i.oid), s.q, ''), NULL
    FROM s JOIN pg_catalog.pg_class i ON i.relnamespace = s.oid AND i.relkind IN ('i', 'I')
    JOIN pg_catalog.pg_index x ON x.indexrelid = i.oid JOIN pg_catalog.pg_class t ON t.oid = x.indrelid
   WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = i.oid AND k.contype IN ('p', 'u', 'x'))
  UNION ALL
  SELECT s.nspname, CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, c.relname, c.relname,
         pg_catalog.replace(pg_catalog.pg_get_viewdef(c.oid), s.q, ''), NULL
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT s.nspname, 'trigger', c.relname, t.tgname,
         pg_catalog.replace(pg_catalog.pg_get_triggerdef(t.oid), s.q, ''), ARRAY[t.tgenabled::text]
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT s.nspname, 'enum', NULL, t.typname, NULL,
         coalesce((SELECT pg_catalog.array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
                     FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '{}')
    FROM s JOIN pg_catalog.pg_type t ON t.typnamespace = s.oid AND t.typtype = 'e'
  UNION ALL
  SELECT s.nspname, 'sequence', NULL, c.relname,
         'AS ' || pg_catalog.format_type(q.seqtypid, NULL) || ' INCREMENT BY ' || q.seqincrement
         || ' MINVALUE ' || q.seqmin || ' MAXVALUE ' || q.seqmax || ' START WITH ' || q.seqstart
         || ' CACHE ' || q.seqcache || CASE WHEN q.seqcycle THEN ' CYCLE' ELSE ' NO CYCLE' END,
         ARRAY[(SELECT d.deptype::text FROM pg_catalog.pg_depend d
                 WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid
                   AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i') LIMIT 1)]
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relkind = 'S'
    JOIN pg_catalog.pg_sequence q ON q.seqrelid = c.oid
  UNION ALL
  SELECT s.nspname, 'function', NULL, pg_catalog.replace(p.oid::pg_catalog.regprocedure::text, s.q, ''),
         pg_catalog.pg_get_functiondef(p.oid), ARRAY[pg_catalog.md5(pg_catalog.replace(pg_catalog.replace(
           pg_catalog.pg_get_functiondef(p.oid), s.q, ''), pg_catalog.quote_literal(s.nspname), '''@'''))]
    FROM s JOIN pg_catalog.pg_proc p ON p.pronamespace = s.oid AND p.prokind IN ('f', 'p')
  UNION ALL
  SELECT s.nspname, 'policy', c.relname, p.polname,
         p.polcmd::text || ' ' || p.polpermissive::text
         || coalesce(' USING ' || pg_catalog.replace(pg_catalog.pg_get_expr(p.polqual, p.polrelid), s.q, ''), '')
         || coalesce(' CHECK ' || pg_catalog.replace(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), s.q, ''), ''),
         NULL
    FROM s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid
    JOIN pg_catalog.pg_policy p ON p.polrelid = c.oid`;

interface Thing {
  kind: string;
  table: string | null;
  name: string;
  def: string | null;
  extra: string[] | null;
}

const keyOf = (thing: Pick<Thing, 'kind' | 'table' | 'name'>) =>
  JSON.stringify([thing.kind, thing.table, thing.name]);
const id = quoteCatalogName;
const TRIGGER_STATES: Record<string, string> = {
  O: 'ENABLE',
  D: 'DISABLE',
  R: 'ENABLE REPLICA',
  A: 'ENABLE ALWAYS',
};

/** The SQL that makes `schema` as `against` (by default its template) is, previewed. */
export async function driftFix(db: pg.Pool, schema: string, against: string | undefined): Promise<DriftFix> {
  assertTenantSchema(schema);
  if (against !== undefined) assertTenantSchema(against);
  // Before its template is looked up: a schema that is not there is 404 for that, not for a template.
  await assertSchemaExists(db, schema);
  const base = against ?? (await templateOf(db, schema));
  // The template's name as PostgreSQL's deparsers qualify with it (quoted only where it must be).
  const { rows: quoted } = await db.query<{ q: string }>(
    'SELECT pg_catalog.quote_ident(nspname) AS q FROM pg_catalog.pg_namespace WHERE nspname = $1',
    [base],
  );
  if (!quoted[0]) throw new NotFound('Schema not found', `schema "${base}" does not exist`);
  const rows = await readCatalog<Row & { schema: string }>(db, OBJECTS, [[schema, base]]);
  const ours = new Map<string, Thing>();
  const theirs = new Map<string, Thing>();
  // A schema compared with itself is both sides.
  for (const row of rows as unknown as Array<Thing & { schema: string }>) {
    if (row.schema === schema) ours.set(keyOf(row), row);
    if (row.schema === base) theirs.set(keyOf(row), row);
  }
  const names: Names = { from: quoted[0].q, fromName: base, toName: schema };
  const writer = new FixWriter(names, ours, theirs);
  writer.write();
  // A statement that names a schema (a function that sets its search_path to it, an argument of
  // the template's type) is no migration's: listed to write by hand, the rest planned.
  const statements: string[] = [];
  for (const statement of writer.statements) {
    const named = ((await schemasNamedIn(statement)) ?? []).filter((name) => name !== 'public');
    if (named.length === 0) statements.push(statement);
    else
      writer.notWritten.push({
        kind: 'statement',
        name: (statement.split('\n')[0] ?? statement).slice(0, 120),
        why: `it names schema ${named.join(', ')}: write it by hand`,
      });
  }
  const sql = statements.join(';\n');
  return {
    schema,
    against: base,
    sql,
    statements: sql ? await planStatements(sql) : [],
    destructive: writer.destructive,
    notWritten: writer.notWritten,
  };
}

/**
 * Writes the statements: drops first (what depends before what it depends on), then what is made
 * or changed, kind by kind in the order each may need the one before (a default may call a
 * function; a check, an index or a trigger may too; a view reads tables).
 */
class FixWriter {
  readonly drops: string[] = [];
  private readonly made = {
    types: [] as string[],
    sequences: [] as string[],
    tables: [] as string[],
    functions: [] as string[],
    constraints: [] as string[],
    indexes: [] as string[],
    views: [] as string[],
    triggers: [] as string[],
  };
  readonly notWritten: DriftFix['notWritten'] = [];
  destructive = false;

  constructor(
    private readonly names: Names,
    private readonly ours: Map<string, Thing>,
    private readonly theirs: Map<string, Thing>,
  ) {}

  get statements(): string[] {
    return [...this.drops, ...Object.values(this.made).flat()];
  }

  /** Each side's objects by kind, grouped once. */
  private readonly byKind = new Map<Map<string, Thing>, Map<string, Thing[]>>();

  private of(kind: string, from: Map<string, Thing>) {
    let kinds = this.byKind.get(from);
    if (!kinds) {
      kinds = new Map();
      for (const thing of from.values()) {
        const same = kinds.get(thing.kind);
        if (same) same.push(thing);
        else kinds.set(thing.kind, [thing]);
      }
      this.byKind.set(from, kinds);
    }
    return kinds.get(kind) ?? [];
  }

  private missing(kind: string) {
    return this.of(kind, this.theirs).filter((thing) => !this.ours.has(keyOf(thing)));
  }

  private extra(kind: string) {
    return this.of(kind, this.ours).filter((thing) => !this.theirs.has(keyOf(thing)));
  }

  /** In both, with other definitions: [ours, theirs]. */
  private different(kind: string, same = (a: Thing, b: Thing) => a.def === b.def) {
    return this.of(kind, this.theirs).flatMap((wanted) => {
      const found = this.ours.get(keyOf(wanted));
      return found && !same(found, wanted) ? [[found, wanted] as const] : [];
    });
  }

  private gone?: Set<string>;
  private added?: Set<string>;
  private tableGone = (table: string | null) => {
    this.gone ??= new Set(this.extra('table').map((t) => t.name));
    return table !== null && this.gone.has(table);
  };
  private tableNew = (table: string | null) => {
    this.added ??= new Set(this.missing('table').map((t) => t.name));
    return table !== null && this.added.has(table);
  };

  write() {
    this.triggers();
    this.views();
    this.indexes();
    this.constraints();
    // Columns and tables go before the functions their defaults may call.
    this.columnsAndTables();
    this.functions();
    this.sequences();
    this.enums();
    for (const policy of [
      ...this.missing('policy'),
      ...this.extra('policy'),
      ...this.different('policy').map(([, t]) => t),
    ])
      this.notWritten.push({
        kind: 'policy',
        name: `${policy.table}.${policy.name}`,
        why: 'policies name roles: write them by hand',
      });
  }

  private triggers() {
    for (const t of this.extra('trigger'))
      if (!this.tableGone(t.table)) this.drops.push(`DROP TRIGGER ${id(t.name)} ON ${id(String(t.table))}`);
    const changed = this.different('trigger');
    for (const [t] of changed) this.drops.push(`DROP TRIGGER ${id(t.name)} ON ${id(String(t.table))}`);
    const enable = (t: Thing) =>
      `ALTER TABLE ${id(String(t.table))} ${TRIGGER_STATES[t.extra?.[0] ?? 'O']} TRIGGER ${id(t.name)}`;
    for (const t of [...this.missing('trigger'), ...changed.map(([, w]) => w)]) {
      this.made.triggers.push(String(t.def));
      if ((t.extra?.[0] ?? 'O') !== 'O') this.made.triggers.push(enable(t));
    }
    // The same trigger, only enabled otherwise (one made again above has its state already).
    const onlyState = (a: Thing, b: Thing) => a.def !== b.def || a.extra?.[0] === b.extra?.[0];
    for (const [, wanted] of this.different('trigger', onlyState)) this.made.triggers.push(enable(wanted));
  }

  private views() {
    for (const kind of ['view', 'materialized view']) {
      const keyword = kind === 'view' ? 'VIEW' : 'MATERIALIZED VIEW';
      const changed = this.different(kind);
      for (const v of [...this.extra(kind), ...changed.map(([o]) => o)])
        this.drops.push(`DROP ${keyword} ${id(v.name)}`);
      for (const v of [...this.missing(kind), ...changed.map(([, w]) => w)])
        this.made.views.push(`CREATE ${keyword} ${id(v.name)} AS\n${String(v.def).replace(/;\s*$/, '')}`);
    }
  }

  private indexes() {
    const changed = this.different('index');
    for (const i of [...this.extra('index'), ...changed.map(([o]) => o)])
      if (!this.tableGone(i.table)) this.drops.push(`DROP INDEX ${id(i.name)}`);
    for (const i of [...this.missing('index'), ...changed.map(([, w]) => w)])
      this.made.indexes.push(String(i.def));
  }

  private constraints() {
    const changed = this.different('constraint');
    for (const c of [...this.extra('constraint'), ...changed.map(([o]) => o)])
      if (!this.tableGone(c.table))
        this.drops.push(`ALTER TABLE ${id(String(c.table))} DROP CONSTRAINT ${id(c.name)}`);
    // Keys before the foreign keys that reference them.
    const wanted = [...this.missing('constraint'), ...changed.map(([, w]) => w)].sort(
      (a, b) => Number(a.extra?.[0] === 'f') - Number(b.extra?.[0] === 'f'),
    );
    for (const c of wanted) {
      // A new table's NOT NULL constraints (PostgreSQL 18) come with its columns.
      if (c.extra?.[0] === 'n' && this.tableNew(c.table)) continue;
      this.made.constraints.push(`ALTER TABLE ${id(String(c.table))} ADD CONSTRAINT ${id(c.name)} ${c.def}`);
    }
  }

  private functions() {
    for (const f of this.extra('function')) {
      this.destructive = true;
      this.drops.push(`DROP FUNCTION ${f.name}`);
    }
    const changed = this.different('function', (a, b) => a.extra?.[0] === b.extra?.[0]).map(([, w]) => w);
    for (const f of [...this.missing('function'), ...changed]) {
      const made = functionDdl(String(f.def), this.names);
      if (!made || made.namesItself) {
        const why = made
          ? `its body names schema ${this.names.fromName}: write it by hand`
          : `PostgreSQL does not print it as a function of schema ${this.names.fromName}`;
        this.notWritten.push({ kind: 'function', name: f.name, why });
        continue;
      }
      this.made.functions.push(made.sql.trimEnd());
    }
  }

  private columnsAndTables() {
    for (const t of this.extra('table')) {
      this.destructive = true;
      this.drops.push(`DROP TABLE ${id(t.name)} CASCADE`);
    }
    for (const t of this.missing('table')) {
      const columns = this.of('column', this.theirs)
        .filter((c) => c.table === t.name)
        .sort((a, b) => Number(a.extra?.[4]) - Number(b.extra?.[4]));
      const lines = columns.flatMap((c) => this.columnDef(c) ?? []);
      const unlogged = t.def === 'u' ? 'UNLOGGED ' : '';
      this.made.tables.push(`CREATE ${unlogged}TABLE ${id(t.name)} (\n  ${lines.join(',\n  ')}\n)`);
    }
    for (const c of this.extra('column')) {
      if (this.tableGone(c.table)) continue;
      this.destructive = true;
      this.drops.push(`ALTER TABLE ${id(String(c.table))} DROP COLUMN ${id(c.name)}`);
    }
    for (const c of this.missing('column')) {
      if (this.tableNew(c.table)) continue;
      const def = this.columnDef(c);
      if (def) this.made.tables.push(`ALTER TABLE ${id(String(c.table))} ADD COLUMN ${def}`);
    }
    const columnSame = (a: Thing, b: Thing) =>
      JSON.stringify([a.def, a.extra?.slice(0, 4)]) === JSON.stringify([b.def, b.extra?.slice(0, 4)]);
    for (const [ours, wanted] of this.different('column', columnSame)) this.alterColumn(ours, wanted);
  }

  /** A column as CREATE TABLE and ADD COLUMN write it; undefined (listed) for identity and generated ones. */
  private columnDef(c: Thing): string | undefined {
    const [notNull, defaultExpr, identity, generated] = c.extra ?? [];
    if (identity || generated) {
      this.notWritten.push({
        kind: 'column',
        name: `${c.table}.${c.name}`,
        why: 'an identity or generated column: add it by hand',
      });
      return undefined;
    }
    return [
      id(c.name),
      c.def,
      defaultExpr ? `DEFAULT ${defaultExpr}` : '',
      notNull === 'true' ? 'NOT NULL' : '',
    ]
      .filter(Boolean)
      .join(' ');
  }

  private alterColumn(ours: Thing, wanted: Thing) {
    const at = `ALTER TABLE ${id(String(ours.table))} ALTER COLUMN ${id(ours.name)}`;
    const [notNull, defaultExpr, identity, generated] = wanted.extra ?? [];
    const [ourNotNull, ourDefault, ourIdentity, ourGenerated] = ours.extra ?? [];
    if (identity !== ourIdentity || generated !== ourGenerated) {
      this.notWritten.push({
        kind: 'column',
        name: `${ours.table}.${ours.name}`,
        why: 'its identity or generation differs: change it by hand',
      });
      return;
    }
    const changes = this.made.tables;
    if (ours.def !== wanted.def)
      changes.push(`${at} TYPE ${wanted.def} USING ${id(ours.name)}::${wanted.def}`);
    if (ourDefault !== defaultExpr)
      changes.push(defaultExpr ? `${at} SET DEFAULT ${defaultExpr}` : `${at} DROP DEFAULT`);
    if (ourNotNull !== notNull) changes.push(`${at} ${notNull === 'true' ? 'SET' : 'DROP'} NOT NULL`);
  }

  private sequences() {
    for (const s of this.extra('sequence')) {
      if (s.extra?.[0]) continue; // a serial or identity column's: it goes with its column
      this.destructive = true;
      this.drops.push(`DROP SEQUENCE ${id(s.name)}`);
    }
    // A serial column's sequence comes before its table (its default names it); an identity
    // column's comes with the column, which is not written.
    for (const s of this.missing('sequence'))
      if (s.extra?.[0] !== 'i') this.made.sequences.push(`CREATE SEQUENCE ${id(s.name)} ${s.def}`);
    for (const [ours, wanted] of this.different('sequence'))
      this.made.sequences.push(
        `ALTER SEQUENCE ${id(ours.name)} ${String(wanted.def).replace(/^AS \S+ /, '')}`,
      );
  }

  private enums() {
    for (const e of this.extra('enum')) {
      this.destructive = true;
      this.drops.push(`DROP TYPE ${id(e.name)}`);
    }
    for (const e of this.missing('enum'))
      this.made.types.push(
        `CREATE TYPE ${id(e.name)} AS ENUM (${(e.extra ?? []).map(quoteLiteral).join(', ')})`,
      );
    for (const [ours, wanted] of this.different(
      'enum',
      (a, b) => JSON.stringify(a.extra) === JSON.stringify(b.extra),
    )) {
      const have = ours.extra ?? [];
      const want = wanted.extra ?? [];
      // Labels can be added, never removed or moved: the labels kept must keep their order.
      const kept = want.filter((label) => have.includes(label));
      if (JSON.stringify(kept) !== JSON.stringify(have)) {
        this.notWritten.push({
          kind: 'enum',
          name: ours.name,
          why: 'labels removed or reordered: PostgreSQL cannot, in place',
        });
        continue;
      }
      // In order, each after the one before it (there by then), the first before the first kept.
      want.forEach((label, i) => {
        if (have.includes(label)) return;
        const where =
          i > 0
            ? ` AFTER ${quoteLiteral(want[i - 1] as string)}`
            : have[0]
              ? ` BEFORE ${quoteLiteral(have[0])}`
              : '';
        this.made.types.push(`ALTER TYPE ${id(ours.name)} ADD VALUE ${quoteLiteral(label)}${where}`);
      });
    }
  }
}
