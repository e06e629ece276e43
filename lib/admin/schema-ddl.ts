import type pg from 'pg';
import { quoteLiteral } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';

/**
 * A tenant schema's structure as the statements that make it again under another name: read on a
 * session of that schema's own role (whose search path is the schema alone, so PostgreSQL's
 * deparsers print its names unqualified), executed on a session of the new schema's role (whose
 * search path is the new schema). Nothing of it runs with the admin's rights.
 *
 * What it makes: enum types, sequences (reset to their start, or to the template's values when its
 * rows are copied), functions and procedures, tables (columns, defaults, identity and generated
 * columns, NOT NULL, CHECK, primary keys, unique and exclusion constraints), views and materialized
 * views, indexes, foreign keys, triggers, row-level security and its policies, comments, and grants
 * to PUBLIC and to the schema's own roles. Anything else in the schema (domains, composite types,
 * partitioned or inherited tables, rules, operators, extensions' objects, statistics objects, ...)
 * is refused, named, before anything is made. So is any text that still names the schema (a
 * function body's `template.table`): a body is the author's text and is never rewritten.
 */

/** The roles of a schema whose grants a copy carries, mapped to the copy's (lib/db/role-names). */
const CARRIED_ROLES = ['_user', '_exec'] as const;
/** Roles of a schema whose rights come with their keys (prepared on a key's creation), never copied. */
const KEY_ROLES = ['_owner', '_svc', '_anon'] as const;

/** A table's rows to copy: its name and the columns COPY writes (generated columns are computed). */
export interface TableData {
  table: string;
  columns: string[];
  /** Its rows travel in COPY's binary form: every column's type is PostgreSQL's own (BINARY_SAFE). */
  binary: boolean;
}

export interface SchemaDdl {
  /** Run before rows are copied in: types, sequences, functions, tables with their keys, views. */
  before: string[];
  /** Run after: indexes, foreign keys, triggers, policies, comments, grants. */
  after: string[];
  /** The template's sequences' values, when its rows come along (`setval`): run after the rows. */
  sequenceValues: string[];
  /** The tables whose rows a copy with data carries, in the order they were made. */
  tables: TableData[];
  /** Materialized views to refresh once rows are in. */
  materialized: string[];
  /** What the copy leaves out, said plainly: grants to roles that are not the schema's own. */
  notCopied: string[];
  /**
   * What still names the schema itself (a function body's `tmpl.t`, its roles by name): made
   * faithfully only under the schema's own name. Refused unless the reader keeps it (a bundle).
   */
  selfNamed: string[];
  counts: {
    tables: number;
    views: number;
    sequences: number;
    functions: number;
    types: number;
    indexes: number;
    triggers: number;
    policies: number;
  };
}

export interface Names {
  /** The template's name as PostgreSQL quotes it (`quote_ident`). */
  from: string;
  fromName: string;
  /** The copy's name, or OPEN_TARGET for a bundle's statements (named on restore: `retarget`). */
  toName: string;
}

/**
 * The copy's name in statements written before it is known (a tenant's bundle, lib/admin/bundle):
 * a NUL, which no text PostgreSQL holds can contain, so `retarget` replaces only what the writer
 * put there: the copy's roles in grants and policies, and its name in a function's search path.
 */
export const OPEN_TARGET = '\u0000';

/** Statements written for OPEN_TARGET, as they make the copy named `copy`. */
export function retarget(statements: readonly string[], copy: string): string[] {
  const swaps = [
    ...[...CARRIED_ROLES, ...KEY_ROLES].map(
      (suffix) => [quoteRole(`${OPEN_TARGET}${suffix}`), quoteRole(`${copy}${suffix}`)] as const,
    ),
    [searchPathItem(OPEN_TARGET), searchPathItem(copy)] as const,
  ];
  return statements.map((sql) =>
    sql.includes(OPEN_TARGET)
      ? swaps.reduce((text, [open, named]) => text.replaceAll(open, named), sql)
      : sql,
  );
}

/** Objects PostgreSQL keeps in a schema that a copy knows how to make again (by `pg_depend`). */
const UNSUPPORTED_SQL = `
  SELECT pg_catalog.pg_describe_object(d.classid, d.objid, 0) AS what
    FROM pg_catalog.pg_depend d
   WHERE d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.refobjid = $1 AND d.deptype = 'n'
     AND NOT (
       (d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND EXISTS (
          SELECT 1 FROM pg_catalog.pg_class c
           WHERE c.oid = d.objid AND c.relkind = ANY ('{r,S,v,m}'::"char"[])
             AND c.reloftype = 0
             AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid)))
       OR (d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND EXISTS (
          SELECT 1 FROM pg_catalog.pg_type t WHERE t.oid = d.objid AND t.typtype = 'e'))
       OR (d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND EXISTS (
          SELECT 1 FROM pg_catalog.pg_proc p WHERE p.oid = d.objid AND p.prokind = ANY ('{f,p}'::"char"[])))
     )
  UNION ALL
  SELECT pg_catalog.pg_describe_object(d.classid, d.objid, 0) || ' (part of extension '
         || pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0) || ')'
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_depend n ON n.classid = d.classid AND n.objid = d.objid AND n.deptype = 'n'
   WHERE n.refobjid = $1 AND d.deptype = 'e'
  UNION ALL
  SELECT 'rule ' || pg_catalog.quote_ident(r.rulename) || ' on ' || pg_catalog.quote_ident(c.relname)
    FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
   WHERE c.relnamespace = $1 AND r.rulename <> '_RETURN'
  LIMIT 6`;

const ENUMS_SQL = `
  SELECT pg_catalog.quote_ident(t.typname) AS name,
         pg_catalog.array_remove(pg_catalog.array_agg(e.enumlabel::text ORDER BY e.enumsortorder), NULL) AS labels
    FROM pg_catalog.pg_type t LEFT JOIN pg_catalog.pg_enum e ON e.enumtypid = t.oid
   WHERE t.typnamespace = $1 AND t.typtype = 'e'
   GROUP BY t.oid, t.typname ORDER BY t.oid`;

const SEQUENCES_SQL = `
  SELECT pg_catalog.quote_ident(c.relname) AS name, pg_catalog.format_type(s.seqtypid, NULL) AS type,
         s.seqstart::text AS start, s.seqincrement::text AS increment, s.seqmin::text AS min,
         s.seqmax::text AS max, s.seqcache::text AS cache, s.seqcycle AS cycle,
         dep.deptype AS owned, pg_catalog.quote_ident(tc.relname) AS "ownerTable",
         pg_catalog.quote_ident(a.attname) AS "ownerColumn",
         CASE WHEN $2::boolean THEN pg_catalog.pg_sequence_last_value(c.oid)::text END AS "lastValue"
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_sequence s ON s.seqrelid = c.oid
    LEFT JOIN pg_catalog.pg_depend dep
           ON dep.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND dep.objid = c.oid
          AND dep.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
          AND dep.deptype = ANY ('{a,i}'::"char"[])
    LEFT JOIN pg_catalog.pg_class tc ON tc.oid = dep.refobjid
    LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = dep.refobjid AND a.attnum = dep.refobjsubid
   WHERE c.relnamespace = $1 AND c.relkind = 'S' ORDER BY c.oid`;

const FUNCTIONS_SQL = `
  SELECT p.oid::pg_catalog.regprocedure::text AS signature, p.prokind AS kind,
         pg_catalog.pg_get_functiondef(p.oid) AS def, p.prosqlbody IS NOT NULL AS atomic,
         EXISTS (SELECT 1 FROM pg_catalog.pg_type t JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
                  WHERE c.relnamespace = $1 AND c.relkind <> 'c'
                    AND (p.prorettype IN (t.oid, t.typarray)
                         OR t.oid = ANY (p.proargtypes::pg_catalog.oid[])
                         OR t.typarray = ANY (p.proargtypes::pg_catalog.oid[]))) AS "usesRowType"
    FROM pg_catalog.pg_proc p
   WHERE p.pronamespace = $1 AND p.prokind = ANY ('{f,p}'::"char"[])
   ORDER BY p.oid`;

/** Types whose binary form is an object's oid. */
const REG_TYPES = `'{regclass,regcollation,regconfig,regdictionary,regnamespace,regoper,regoperator,regproc,regprocedure,regrole,regtype}'::pg_catalog.regtype[]`;

/**
 * Whether a type's values travel in COPY's binary form (a third faster to read and write than its
 * text): a base type PostgreSQL itself defines with a fixed oid (below FirstGenbkiObjectId, the
 * same in every major), with send and receive functions. Not a tenant's types (a binary array
 * names its element type's oid, which differs in another schema), nor domains, enums, composites
 * and ranges, nor the reg* types: in binary those are bare oids, which would name the source's
 * objects rather than the copy's.
 */
const BINARY_SAFE = (type: string) =>
  // Both sides of each comparison pg_catalog's own types, so pg_catalog's operator is the exact
  // match (a schema with operators of its own is refused before this read, UNSUPPORTED_SQL).
  `coalesce(${type}.oid < '10000'::pg_catalog.oid AND ${type}.typtype = 'b'::"char"
     AND ${type}.typsend::pg_catalog.oid <> '0'::pg_catalog.oid AND ${type}.typreceive::pg_catalog.oid <> '0'::pg_catalog.oid
     AND NOT (${type}.oid = ANY (${REG_TYPES}::pg_catalog.oid[])), false)`;

const TABLES_SQL = `
  SELECT pg_catalog.quote_ident(c.relname) AS name, c.relpersistence AS persistence,
         c.reloptions AS options, c.relrowsecurity AS rls, c.relforcerowsecurity AS "forceRls",
         coalesce((
           SELECT pg_catalog.json_agg(pg_catalog.json_build_object(
                    'name', pg_catalog.quote_ident(a.attname),
                    'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
                    'notNull', a.attnotnull, 'identity', a.attidentity, 'generated', a.attgenerated,
                    'default', pg_catalog.pg_get_expr(d.adbin, d.adrelid),
                    'collation', CASE WHEN a.attcollation <> t.typcollation
                                      THEN pg_catalog.quote_ident(cn.nspname) || '.' || pg_catalog.quote_ident(co.collname) END,
                    'binary', ${BINARY_SAFE('t')} AND (t.typcategory <> 'A'::"char" OR ${BINARY_SAFE('e')}))
                  ORDER BY a.attnum)
             FROM pg_catalog.pg_attribute a
             JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
             LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem
             LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
             LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]') AS columns
    FROM pg_catalog.pg_class c
   WHERE c.relnamespace = $1 AND c.relkind = 'r' ORDER BY c.oid`;

const CONSTRAINTS_SQL = `
  SELECT pg_catalog.quote_ident(con.conname) AS name, pg_catalog.quote_ident(c.relname) AS "table",
         con.contype AS type, con.convalidated AS validated, pg_catalog.pg_get_constraintdef(con.oid, true) AS def,
         -- A view grouping by a key, or a function's SQL body, needs the key made before it.
         EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.refclassid = 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid AND d.refobjid = con.oid
                    AND d.classid = ANY ('{pg_catalog.pg_rewrite,pg_catalog.pg_proc}'::pg_catalog.regclass[]::pg_catalog.oid[])) AS needed
    FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
   WHERE c.relnamespace = $1 AND c.relkind = 'r'
     AND con.contype = ANY ('{c,p,u,x,f}'::"char"[])
   ORDER BY con.oid`;

const INDEXES_SQL = `
  SELECT pg_catalog.pg_get_indexdef(i.indexrelid, 0, true) AS def
    FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
   WHERE t.relnamespace = $1 AND t.relkind = ANY ('{r,m}'::"char"[])
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint con
                      WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid
                        AND con.contype = ANY ('{p,u,x}'::"char"[]))
   ORDER BY i.indexrelid`;

const VIEWS_SQL = `
  SELECT c.oid::text AS id, pg_catalog.quote_ident(c.relname) AS name, c.relkind = 'm' AS materialized,
         c.reloptions AS options, pg_catalog.pg_get_viewdef(c.oid, true) AS def,
         ARRAY(SELECT DISTINCT d.refobjid::text FROM pg_catalog.pg_rewrite r
                 JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                  AND d.objid = r.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
                WHERE r.ev_class = c.oid AND d.refobjid <> c.oid) AS uses
    FROM pg_catalog.pg_class c
   WHERE c.relnamespace = $1 AND c.relkind = ANY ('{v,m}'::"char"[]) ORDER BY c.oid`;

const TRIGGERS_SQL = `
  SELECT pg_catalog.quote_ident(tg.tgname) AS name, pg_catalog.quote_ident(c.relname) AS "table",
         pg_catalog.pg_get_triggerdef(tg.oid, true) AS def, tg.tgenabled AS enabled
    FROM pg_catalog.pg_trigger tg JOIN pg_catalog.pg_class c ON c.oid = tg.tgrelid
   WHERE c.relnamespace = $1 AND NOT tg.tgisinternal ORDER BY tg.oid`;

const POLICIES_SQL = `
  SELECT pg_catalog.quote_ident(p.polname) AS name, pg_catalog.quote_ident(c.relname) AS "table",
         p.polpermissive AS permissive, p.polcmd AS command,
         ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r)::text END
                 FROM pg_catalog.unnest(p.polroles) r) AS roles,
         pg_catalog.pg_get_expr(p.polqual, p.polrelid) AS using,
         pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) AS "check"
    FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
   WHERE c.relnamespace = $1 ORDER BY p.oid`;

const COMMENTS_SQL = `
  SELECT CASE c.relkind WHEN 'r' THEN 'TABLE ' WHEN 'v' THEN 'VIEW ' WHEN 'm' THEN 'MATERIALIZED VIEW '
                        WHEN 'S' THEN 'SEQUENCE ' ELSE 'INDEX ' END
         || CASE WHEN d.objsubid = 0 THEN pg_catalog.quote_ident(c.relname) END AS target,
         CASE WHEN d.objsubid <> 0 THEN 'COLUMN ' || pg_catalog.quote_ident(c.relname) || '.'
              || pg_catalog.quote_ident((SELECT a.attname FROM pg_catalog.pg_attribute a
                                          WHERE a.attrelid = c.oid AND a.attnum = d.objsubid)) END AS "column",
         d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_class c ON c.oid = d.objoid
   WHERE d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.relnamespace = $1
     AND c.relkind = ANY ('{r,v,m,S,i}'::"char"[])
  UNION ALL
  SELECT 'TYPE ' || pg_catalog.quote_ident(t.typname), NULL, d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_type t ON t.oid = d.objoid
   WHERE d.classoid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.typnamespace = $1
  UNION ALL
  SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' ELSE 'FUNCTION ' END || p.oid::pg_catalog.regprocedure::text,
         NULL, d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_proc p ON p.oid = d.objoid
   WHERE d.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.pronamespace = $1
  UNION ALL
  SELECT 'CONSTRAINT ' || pg_catalog.quote_ident(con.conname) || ' ON ' || pg_catalog.quote_ident(c.relname),
         NULL, d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_constraint con ON con.oid = d.objoid
    JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
   WHERE d.classoid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND c.relnamespace = $1
  UNION ALL
  SELECT 'TRIGGER ' || pg_catalog.quote_ident(tg.tgname) || ' ON ' || pg_catalog.quote_ident(c.relname),
         NULL, d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_trigger tg ON tg.oid = d.objoid
    JOIN pg_catalog.pg_class c ON c.oid = tg.tgrelid
   WHERE d.classoid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND c.relnamespace = $1
  UNION ALL
  SELECT 'POLICY ' || pg_catalog.quote_ident(p.polname) || ' ON ' || pg_catalog.quote_ident(c.relname),
         NULL, d.description
    FROM pg_catalog.pg_description d JOIN pg_catalog.pg_policy p ON p.oid = d.objoid
    JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
   WHERE d.classoid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND c.relnamespace = $1`;

const GRANTS_SQL = `
  SELECT o.kind, o.name, a.grantee::text AS grantee,
         CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END AS "granteeName",
         a.privilege_type AS privilege, a.is_grantable AS grantable
    FROM (SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
                 pg_catalog.quote_ident(c.relname) AS name, c.relacl AS acl, c.relowner AS owner, c.oid AS id
            FROM pg_catalog.pg_class c
           WHERE c.relnamespace = $1 AND c.relkind = ANY ('{r,v,m,S}'::"char"[]) AND c.relacl IS NOT NULL
          UNION ALL
          SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                 p.oid::pg_catalog.regprocedure::text, p.proacl, p.proowner, p.oid
            FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = $1 AND p.prokind = ANY ('{f,p}'::"char"[]) AND p.proacl IS NOT NULL
          UNION ALL
          SELECT 'TYPE', pg_catalog.quote_ident(t.typname), t.typacl, t.typowner, t.oid
            FROM pg_catalog.pg_type t
           WHERE t.typnamespace = $1 AND t.typtype = 'e' AND t.typacl IS NOT NULL) o
    LEFT JOIN LATERAL (SELECT * FROM pg_catalog.aclexplode(o.acl) x WHERE x.grantee <> o.owner) a ON true
   ORDER BY o.id, a.grantee, a.privilege_type`;

type Row = Record<string, unknown>;

const READS = [
  ENUMS_SQL,
  SEQUENCES_SQL,
  FUNCTIONS_SQL,
  TABLES_SQL,
  CONSTRAINTS_SQL,
  INDEXES_SQL,
  VIEWS_SQL,
  TRIGGERS_SQL,
  POLICIES_SQL,
  COMMENTS_SQL,
  GRANTS_SQL,
];

/**
 * The reads in one round trip (a simple query of several statements takes no parameters: the
 * schema's oid, a number the catalog gave, and the flag are written in).
 */
async function readAll(
  client: pg.ClientBase,
  reads: string[],
  ns: string,
  withData: boolean,
): Promise<Row[][]> {
  if (!/^\d+$/.test(ns)) throw new Error(`not an oid: ${ns}`);
  const text = reads
    .map((sql) => sql.replaceAll('$1', `${ns}::pg_catalog.oid`).replaceAll('$2', withData ? 'true' : 'false'))
    .join(';\n');
  const results = (await client.query<Row>(text)) as unknown as pg.QueryResult<Row> | pg.QueryResult<Row>[];
  return (Array.isArray(results) ? results : [results]).map((result) => result.rows);
}

export interface ReadOptions {
  /** Keep what names the schema itself (`selfNamed`) rather than refuse it: a bundle's. */
  keepSelfNamed?: boolean;
  /** What the reading is for, in a refusal: a template `copied`, a schema `backed up`. */
  purpose?: 'copied' | 'backed up';
}

/**
 * Reads the schema's structure on `client`, a session of the schema's own role, in the caller's
 * transaction (one snapshot), and writes it as the statements that make it again as `copy`.
 * `withData`: sequences keep the template's values and keys are made after the rows (its rows
 * come along). Refuses, with the objects named, a schema it cannot copy faithfully.
 */
export async function readSchemaDdl(
  client: pg.ClientBase,
  template: string,
  copy: string,
  withData: boolean,
  { keepSelfNamed = false, purpose = 'copied' }: ReadOptions = {},
): Promise<SchemaDdl> {
  const { rows: found } = await client.query<{ id: string; from: string }>(
    `SELECT n.oid::text AS id, pg_catalog.quote_ident($1) AS "from"
       FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`,
    [template],
  );
  if (!found[0]) throw new BadRequest('Template not found', `schema "${template}" does not exist`);
  const ns = found[0].id;
  const names: Names = { from: found[0].from, fromName: template, toName: copy };
  const unsupported = await readAll(client, [UNSUPPORTED_SQL], ns, withData);
  if (unsupported[0]?.length)
    throw cannotCopy(
      template,
      unsupported[0].map((row) => String(row.what)),
      purpose,
    );
  const [
    enums = [],
    sequences = [],
    functions = [],
    tables = [],
    constraints = [],
    indexes = [],
    views = [],
    triggers = [],
    policies = [],
    comments = [],
    grants = [],
  ] = await readAll(client, READS, ns, withData);
  const writer = new Writer(names, {
    tables: tables.length,
    views: views.length,
    sequences: sequences.filter((s) => s.owned !== 'i').length,
    functions: functions.length,
    types: enums.length,
    indexes: indexes.length,
    triggers: triggers.length,
    policies: policies.length,
  });
  writer.types(enums);
  const identities = writer.sequences(sequences);
  const late = writer.functions(functions);
  writer.tables(tables, constraints, identities, withData);
  writer.ownedSequences(sequences);
  writer.views(views);
  writer.ddl.before.push(...late);
  for (const index of indexes) writer.ddl.after.push(writer.checked('an index', String(index.def)));
  writer.ddl.after.push(...writer.foreignKeys);
  writer.triggers(triggers);
  writer.policies(policies);
  for (const comment of comments) {
    const target = comment.column ?? comment.target;
    writer.ddl.after.push(`COMMENT ON ${target} IS ${quoteLiteral(String(comment.description))}`);
  }
  writer.ddl.after.push(...grantsDdl(grants, names, writer.ddl.notCopied));
  if (writer.problems.length > 0) throw cannotCopy(template, writer.problems, purpose);
  if (writer.ddl.selfNamed.length > 0 && !keepSelfNamed)
    throw cannotCopy(template, writer.ddl.selfNamed, purpose);
  return writer.ddl;
}

/** Writes the statements kind by kind, and collects what it cannot write faithfully. */
class Writer {
  readonly ddl: SchemaDdl;
  readonly problems: string[] = [];
  /** Foreign keys, made after every index (one may reference a column only a unique index covers). */
  readonly foreignKeys: string[] = [];

  constructor(
    private readonly names: Names,
    counts: SchemaDdl['counts'],
  ) {
    this.ddl = {
      before: [],
      after: [],
      sequenceValues: [],
      tables: [],
      materialized: [],
      notCopied: [],
      selfNamed: [],
      counts,
    };
  }

  /** A deparsed statement, refused when it still names the template (its name was shadowed). */
  checked(what: string, sql: string): string {
    if (namesTemplate(sql, this.names)) this.ddl.selfNamed.push(`${what} names schema ${this.names.from}`);
    return sql;
  }

  types(enums: Row[]) {
    for (const type of enums) {
      const labels = (type.labels as string[]).map(quoteLiteral).join(', ');
      this.ddl.before.push(`CREATE TYPE ${type.name} AS ENUM (${labels})`);
    }
  }

  /** Sequences of their own and of serial columns; identity columns' come with their column (returned). */
  sequences(sequences: Row[]): Map<string, Row> {
    const identities = new Map<string, Row>();
    for (const sequence of sequences) {
      if (sequence.owned === 'i') identities.set(`${sequence.ownerTable}.${sequence.ownerColumn}`, sequence);
      else
        this.ddl.before.push(
          `CREATE SEQUENCE ${sequence.name} AS ${sequence.type} ${sequenceOptions(sequence)}`,
        );
      if (sequence.lastValue !== null) {
        this.ddl.sequenceValues.push(
          `SELECT pg_catalog.setval(${quoteLiteral(String(sequence.name))}, ${sequence.lastValue})`,
        );
      }
    }
    return identities;
  }

  ownedSequences(sequences: Row[]) {
    for (const sequence of sequences.filter((s) => s.owned === 'a')) {
      this.ddl.before.push(
        `ALTER SEQUENCE ${sequence.name} OWNED BY ${sequence.ownerTable}.${sequence.ownerColumn}`,
      );
    }
  }

  /**
   * Functions whose bodies are text, now; those with a parsed body (BEGIN ATOMIC) or a table's row
   * type in their signature (`RETURNS SETOF customers`) returned for after the tables and views.
   */
  functions(functions: Row[]): string[] {
    const late: string[] = [];
    for (const fn of functions) {
      const made = functionDdl(String(fn.def), this.names);
      if (made === undefined) {
        this.problems.push(
          `function ${fn.signature} is not printed as a function of schema ${this.names.from}`,
        );
        continue;
      }
      if (made.namesItself)
        this.ddl.selfNamed.push(`function ${fn.signature} names schema ${this.names.from} in its body`);
      (fn.atomic || fn.usesRowType ? late : this.ddl.before).push(made.sql);
    }
    return late;
  }

  /**
   * Tables with their columns and valid checks inside CREATE TABLE; NOT VALID checks, foreign keys
   * and, when rows come along, keys after the rows, as PostgreSQL's own dump does: an index built
   * over the rows once is a third faster than one kept up row by row. A key that a view or a
   * function's SQL body needs (grouping by it) is made with its table.
   */
  tables(tables: Row[], constraints: Row[], identities: Map<string, Row>, keysAfterRows: boolean) {
    const inline = this.constraints(constraints, keysAfterRows);
    for (const table of tables) {
      const columns = table.columns as Row[];
      const lines = columns.map((column) =>
        this.checked(
          `column ${table.name}.${column.name}`,
          columnDdl(column, identities.get(`${table.name}.${column.name}`)),
        ),
      );
      lines.push(...(inline.get(String(table.name)) ?? []));
      const unlogged = table.persistence === 'u' ? 'UNLOGGED ' : '';
      this.ddl.before.push(
        `CREATE ${unlogged}TABLE ${table.name} (\n  ${lines.join(',\n  ')}\n)${withOptions(table.options)}`,
      );
      const copied = columns.filter((column) => column.generated === '');
      this.ddl.tables.push({
        table: String(table.name),
        columns: copied.map((column) => String(column.name)),
        binary: copied.length > 0 && copied.every((column) => column.binary === true),
      });
      if (table.rls) this.ddl.after.push(`ALTER TABLE ${table.name} ENABLE ROW LEVEL SECURITY`);
      if (table.forceRls) this.ddl.after.push(`ALTER TABLE ${table.name} FORCE ROW LEVEL SECURITY`);
    }
  }

  /** Places each constraint (see tables): answers those made inside CREATE TABLE, by table. */
  private constraints(constraints: Row[], keysAfterRows: boolean): Map<string, string[]> {
    const inline = new Map<string, string[]>();
    for (const constraint of constraints) {
      const def = this.checked(
        `constraint ${constraint.name} on ${constraint.table}`,
        String(constraint.def),
      );
      const add = `CONSTRAINT ${constraint.name} ${def}`;
      const afterRows =
        !constraint.validated || (keysAfterRows && constraint.type !== 'c' && !constraint.needed);
      if (constraint.type === 'f') {
        this.foreignKeys.push(`ALTER TABLE ${constraint.table} ADD ${add}`);
      } else if (afterRows) {
        this.ddl.after.push(`ALTER TABLE ${constraint.table} ADD ${add}`);
      } else {
        inline.set(String(constraint.table), [...(inline.get(String(constraint.table)) ?? []), add]);
      }
    }
    return inline;
  }

  views(views: Row[]) {
    for (const view of inDependencyOrder(views)) {
      const def = this.checked(`view ${view.name}`, String(view.def).replace(/;\s*$/, ''));
      if (view.materialized) {
        this.ddl.before.push(
          `CREATE MATERIALIZED VIEW ${view.name}${withOptions(view.options)} AS\n${def}\nWITH NO DATA`,
        );
        this.ddl.materialized.push(String(view.name));
      } else {
        this.ddl.before.push(`CREATE VIEW ${view.name}${withOptions(view.options)} AS\n${def}`);
      }
    }
  }

  triggers(triggers: Row[]) {
    for (const trigger of triggers) {
      this.ddl.after.push(this.checked(`trigger ${trigger.name} on ${trigger.table}`, String(trigger.def)));
      const state = TRIGGER_STATES[String(trigger.enabled)];
      if (state) this.ddl.after.push(`ALTER TABLE ${trigger.table} ${state} TRIGGER ${trigger.name}`);
    }
  }

  policies(policies: Row[]) {
    for (const policy of policies) {
      const what = `policy ${policy.name} on ${policy.table}`;
      const keyRole = (policy.roles as string[]).find((role) =>
        ['_svc', '_anon'].some((suffix) => role === `${this.names.fromName}${suffix}`),
      );
      if (keyRole) {
        this.problems.push(
          `${what} is for ${keyRole}, a key's role, which a new schema has only once it has a key: make the policy after the copy`,
        );
        continue;
      }
      const roles = (policy.roles as string[]).map((role) => mappedRole(role, this.names));
      if (roles.includes(undefined)) {
        this.problems.push(`${what} is for a role other than PUBLIC and the schema's own`);
        continue;
      }
      const kind = policy.permissive ? 'PERMISSIVE' : 'RESTRICTIVE';
      const using = policy.using === null ? '' : ` USING (${policy.using})`;
      const check = policy.check === null ? '' : ` WITH CHECK (${policy.check})`;
      const command = POLICY_COMMANDS[String(policy.command)];
      const sql = `CREATE POLICY ${policy.name} ON ${policy.table} AS ${kind} FOR ${command} TO ${roles.join(', ')}${using}${check}`;
      this.ddl.after.push(this.checked(what, sql));
    }
  }
}

const TRIGGER_STATES: Record<string, string | undefined> = {
  D: 'DISABLE',
  R: 'ENABLE REPLICA',
  A: 'ENABLE ALWAYS',
};
const POLICY_COMMANDS: Record<string, string | undefined> = {
  '*': 'ALL',
  r: 'SELECT',
  a: 'INSERT',
  w: 'UPDATE',
  d: 'DELETE',
};

/** A relation's storage or view options as the catalog keeps them (`fillfactor=70`). */
const withOptions = (options: unknown) => {
  const list = options as string[] | null;
  return list?.length ? ` WITH (${list.join(', ')})` : '';
};

/** A run of identifier characters: a name as SQL text holds it. */
const WORD = /[A-Za-z_][\w$]*/g;
const IDENTIFIER_START = /[A-Za-z_]/;
const IDENTIFIER_PART = /[\w$]/;

/** A quoted identifier starting at `i` (at its quote): its name, and where the text goes on. */
function quotedAt(text: string, i: number): [name: string, next: number] {
  let j = i + 1;
  let name = '';
  while (j < text.length && !(text[j] === '"' && text[j + 1] !== '"')) {
    name += text[j];
    j += text[j] === '"' ? 2 : 1;
  }
  return [name, j + 1];
}

/** An unquoted identifier starting at `i`, folded as PostgreSQL folds it, and where the text goes on. */
function wordAt(text: string, i: number): [name: string, next: number] {
  let j = i + 1;
  while (j < text.length && IDENTIFIER_PART.test(text[j] as string)) j++;
  return [text.slice(i, j).toLowerCase(), j];
}

/** The names the text uses as qualifiers (`name.` or `"name".`), unquoted: one pass, no backtracking. */
function* qualifiers(text: string): Generator<string> {
  let i = 0;
  while (i < text.length) {
    const start = text[i] as string;
    if (start !== '"' && !IDENTIFIER_START.test(start)) {
      i++;
      continue;
    }
    const [name, next] = start === '"' ? quotedAt(text, i) : wordAt(text, i);
    i = next;
    while (i < text.length && /\s/.test(text[i] as string)) i++;
    if (text[i] === '.') yield name;
  }
}

/** Whether the text names the template as a qualifier (`tmpl.t`, `"tmpl".t`, `TMPL.t`). */
function namesTemplate(text: string, { fromName }: Names): boolean {
  for (const name of qualifiers(text)) if (name === fromName || name === fromName.toLowerCase()) return true;
  return false;
}

/** Whether the text holds one of the template's own roles by name (`tmpl_owner`, ...). */
function namesRole(text: string, { fromName }: Names): boolean {
  const roles = new Set(
    [...CARRIED_ROLES, ...KEY_ROLES].map((suffix) => `${fromName}${suffix}`.toLowerCase()),
  );
  for (const [word] of text.matchAll(WORD)) if (roles.has(word.toLowerCase())) return true;
  return false;
}

/**
 * A function as the copy makes it: `CREATE OR REPLACE FUNCTION tmpl.f(...)` made unqualified (so
 * it lands in the copy's schema) and a `SET search_path` that names the template made to name the
 * copy. `namesItself` when its body still names the template or its roles: a body is never
 * rewritten. undefined when PostgreSQL did not print it as the template's function.
 */
export function functionDdl(def: string, names: Names): { sql: string; namesItself: boolean } | undefined {
  const header = ['FUNCTION', 'PROCEDURE']
    .map((kind) => `CREATE OR REPLACE ${kind} `)
    .find((start) => def.startsWith(`${start}${names.from}.`));
  if (header === undefined) return undefined;
  const sql = (header + def.slice(header.length + names.from.length + 1)).replace(
    /^ SET search_path TO (.*)$/m,
    (line, list: string) =>
      line.replace(
        list,
        list
          .split(', ')
          .map((item) => (item === searchPathItem(names.fromName) ? searchPathItem(names.toName) : item))
          .join(', '),
      ),
  );
  const body = sql.slice(sql.indexOf('\n'));
  return { sql, namesItself: namesTemplate(body, names) || namesRole(body, names) };
}

/** A schema's name in a function's `SET search_path TO` list, as pg_get_functiondef prints it. */
const searchPathItem = (name: string) => `'${name.replace(/'/g, "''")}'`;

function sequenceOptions(sequence: Row): string {
  return [
    `INCREMENT BY ${sequence.increment}`,
    `MINVALUE ${sequence.min}`,
    `MAXVALUE ${sequence.max}`,
    `START WITH ${sequence.start}`,
    `CACHE ${sequence.cache}`,
    sequence.cycle ? 'CYCLE' : 'NO CYCLE',
  ].join(' ');
}

function columnDdl(column: Row, identity: Row | undefined): string {
  const parts = [String(column.name), String(column.type)];
  if (column.collation) parts.push(`COLLATE ${column.collation}`);
  if (column.generated === 's') {
    parts.push(`GENERATED ALWAYS AS (${column.default}) STORED`);
  } else if (column.identity === 'a' || column.identity === 'd') {
    const kind = column.identity === 'a' ? 'ALWAYS' : 'BY DEFAULT';
    const options = identity ? ` (SEQUENCE NAME ${identity.name} ${sequenceOptions(identity)})` : '';
    parts.push(`GENERATED ${kind} AS IDENTITY${options}`);
  } else if (column.default !== null) {
    parts.push(`DEFAULT ${column.default}`);
  }
  if (column.notNull) parts.push('NOT NULL');
  return parts.join(' ');
}

/** Views after every view they read, so each is made after what it names. */
function inDependencyOrder(views: Row[]): Row[] {
  const byId = new Map(views.map((view) => [String(view.id), view]));
  const ordered: Row[] = [];
  const placed = new Set<string>();
  const place = (view: Row, path: Set<string>) => {
    const id = String(view.id);
    if (placed.has(id) || path.has(id)) return;
    path.add(id);
    for (const used of view.uses as string[]) {
      const other = byId.get(used);
      if (other) place(other, path);
    }
    placed.add(id);
    ordered.push(view);
  };
  for (const view of views) place(view, new Set());
  return ordered;
}

/** A role of the template as the copy's: PUBLIC, or one of the schema's own roles renamed; else undefined. */
function mappedRole(role: string, names: Names): string | undefined {
  if (role === 'public' || role === 'PUBLIC') return 'PUBLIC';
  for (const suffix of [...CARRIED_ROLES, ...KEY_ROLES]) {
    if (role === `${names.fromName}${suffix}`) return quoteRole(`${names.toName}${suffix}`);
  }
  return undefined;
}

const quoteRole = (role: string) => `"${role.replace(/"/g, '""')}"`;

/**
 * Each object's privileges as the copy's: what PUBLIC holds (after revoking what it holds by
 * default, when the template changed that) and what the schema's login and exec roles hold.
 * The owner's are its by owning; the key roles' come with their keys. Grants to anyone else are
 * not copied, and said so.
 */
function grantsDdl(grants: Row[], names: Names, notCopied: string[]): string[] {
  const statements: string[] = [];
  const seen = new Set<string>();
  const byGrantee = new Map<string, string[]>();
  for (const grant of grants) {
    const object = `${grant.kind} ${grant.name}`;
    if (!seen.has(object)) {
      seen.add(object);
      statements.push(`REVOKE ALL ON ${object} FROM PUBLIC`);
    }
    if (grant.grantee === null) continue;
    const role = String(grant.granteeName);
    const keyRole = KEY_ROLES.some((suffix) => role === `${names.fromName}${suffix}`);
    if (keyRole) continue;
    const to = mappedRole(role, names);
    if (to === undefined) {
      notCopied.push(`${grant.privilege} on ${object} to ${role}`);
      continue;
    }
    // A role of a bundle's holds OPEN_TARGET (a NUL): the key is JSON, never split on a character.
    const key = JSON.stringify([object, to, grant.grantable ? ' WITH GRANT OPTION' : '']);
    byGrantee.set(key, [...(byGrantee.get(key) ?? []), String(grant.privilege)]);
  }
  for (const [key, privileges] of byGrantee) {
    const [object, to, option] = JSON.parse(key) as [string, string, string];
    statements.push(`GRANT ${privileges.join(', ')} ON ${object} TO ${to}${option}`);
  }
  return statements;
}

function cannotCopy(template: string, problems: string[], purpose: ReadOptions['purpose']): BadRequest {
  const shown = problems.slice(0, 5).join('; ');
  const more = problems.length > 5 ? ` and ${problems.length - 5} more` : '';
  return new BadRequest(
    purpose === 'backed up' ? 'Schema not supported' : 'Template not supported',
    `schema "${template}" cannot be ${purpose} faithfully: ${shown}${more}. Remove or rewrite these (a body must name its objects unqualified: the copy's search path is its own schema) and try again`,
  );
}
