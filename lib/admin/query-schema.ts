import { assertTenantSchema } from '#lib/db/executor';
import { isIdentifier } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';
import { loggedError, logger } from '#lib/log';
import type { Principal } from '#lib/principal';

/**
 * Which schema the admin's SQL runs in when they send none: the one schema it names, read with
 * PostgreSQL's own parser (libpg-query: PostgreSQL 17's grammar compiled to WebAssembly), so
 * `ALTER TABLE shop.orders ...` runs as shop's role with shop first on the search path. Whatever
 * is chosen, the SQL runs as a schema's role, never with the admin's rights: a wrong guess can
 * only fail, with a privilege error. Chosen before lib/admin/query runs anything.
 */

/** Where SQL that names no schema runs (SPEC.md: `schema` defaults to public). */
const DEFAULT_SCHEMA = 'public';

/** Schemas every role may read: naming them does not pick a schema to run in. */
const SHARED_SCHEMAS = new Set(['pg_catalog', 'information_schema', 'pg_toast']);

/** The parse tree, as libpg-query gives it: JSON, some nodes wrapped in their type (`{String: ...}`). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Node = { [key: string]: Json };

const isNode = (value: Json | undefined): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const str = (value: Json | undefined) => (typeof value === 'string' ? value : undefined);

/** A `String` node's text. */
const text = (node: Json | undefined) =>
  isNode(node) && isNode(node.String) ? str(node.String.sval) : undefined;

/** A `List` node's items, or the list itself. */
const items = (value: Json | undefined): Json[] | undefined =>
  Array.isArray(value) ? value : isNode(value) && isNode(value.List) ? items(value.List.items) : undefined;

/**
 * The schema in a dotted name: before the object's own name (`shop.orders`, `db.shop.orders`), or
 * before a relation and its member (`shop.orders.id`, `db.shop.orders.id`, a trigger `shop.t.trg`).
 */
function qualifier(name: Json | undefined, of: 'object' | 'member'): string | undefined {
  const parts = items(name);
  const last = of === 'object' ? 2 : 3;
  return parts && parts.length >= last ? text(parts[parts.length - last]) : undefined;
}

/** Object types named `relation.member`, whose dotted names hold the schema one place earlier. */
const MEMBERS = new Set([
  'OBJECT_COLUMN',
  'OBJECT_TABCONSTRAINT',
  'OBJECT_TRIGGER',
  'OBJECT_POLICY',
  'OBJECT_RULE',
]);

/** Object types whose dotted names start with an access method: `btree.shop.ops`. */
const BY_ACCESS_METHOD = new Set(['OBJECT_OPCLASS', 'OBJECT_OPFAMILY']);

/** The schema in the name of an object of DROP, COMMENT ON, ALTER ... (a `List` of `String`s). */
function objectQualifier(object: Json, type: string): string | undefined {
  const parts = items(object);
  if (!parts) return undefined;
  return qualifier(
    BY_ACCESS_METHOD.has(type) ? parts.slice(1) : parts,
    MEMBERS.has(type) ? 'member' : 'object',
  );
}

type Add = (schema: string | undefined) => void;
/** Reads the schemas a node names in one of its keys (the node's children are walked apart). */
type Reader = (node: Node, add: Add) => void;

const dotted =
  (key: string): Reader =>
  (node, add) =>
    add(qualifier(node[key], 'object'));

/** DROP, COMMENT ON, ALTER ... OWNER / RENAME / SET SCHEMA, SECURITY LABEL, GRANT: their objects. */
const objects: Reader = (node, add) => {
  const type = String(node.removeType ?? node.objtype ?? node.objectType ?? node.renameType);
  const schemas = type === 'OBJECT_SCHEMA' || node.targtype === 'ACL_TARGET_ALL_IN_SCHEMA';
  for (const object of items(node.objects) ?? (node.object ? [node.object] : [])) {
    add(schemas ? text(object) : objectQualifier(object, type));
  }
};

const schemaRenamed =
  (key: 'subname' | 'newname'): Reader =>
  (node, add) => {
    if (node.renameType === 'OBJECT_SCHEMA') add(str(node[key]));
  };

/** SET search_path TO shop (also as a function's own setting); `"$user"` is no schema. */
function searchPath(node: Node, add: Add): void {
  for (const arg of items(node.args) ?? []) {
    const value = isNode(arg) && isNode(arg.A_Const) ? arg.A_Const.sval : undefined;
    const name = isNode(value) ? str(value.sval) : undefined;
    if (name !== '$user') add(name);
  }
}

/** CREATE OPERATOR's other operators (dotted names); ALTER SEQUENCE ... OWNED BY a column. */
const DEFINITION_NAMES: Record<string, 'object' | 'member'> = {
  commutator: 'object',
  negator: 'object',
  owned_by: 'member',
};

/**
 * The keys that can name a schema, each with how to read it. Dotted names (a list of `String`s)
 * name functions, types, operators, collations, operator classes...; the other keys hold a
 * schema's own name.
 */
const READERS = new Map<string, Reader>([
  // RangeVar (tables, views, sequences... anywhere); CreateSchemaStmt.
  ['schemaname', (node, add) => add(str(node.schemaname))],
  // TypeName; `shop.t.col%TYPE` names a column.
  ['names', (node, add) => add(qualifier(node.names, node.pct_type === true ? 'member' : 'object'))],
  // ColumnRef is not read: `a.b.c` is as often table.column.field (`r.payload.x`) as
  // schema.table.column, which PostgreSQL reads so only beside FROM a.b, read above.
  ...[
    'funcname', // FuncCall, CreateFunctionStmt, CreateTrigStmt
    'func_name', // CreateConversionStmt
    'operName', // SubLink: x OPERATOR(shop.=) ANY (...)
    'useOp', // ORDER BY x USING shop.<
    'defnames', // CREATE OPERATOR / AGGREGATE / TYPE / COLLATION / STATISTICS ...
    'objname', // ObjectWithArgs: functions and operators by signature
    'collname', // COLLATE shop.c
    'collation', // IndexElem
    'opclass', // IndexElem
    'opclassname',
    'opfamilyname',
    'conversion_name',
    'typeName', // CreateEnumStmt, AlterEnumStmt, CreateRangeStmt, AlterDomainStmt
    'domainname',
    'cfgname',
    'dictname',
    'method', // TABLESAMPLE shop.m(...)
  ].map((key): [string, Reader] => [key, dotted(key)]),
  [
    'name',
    (node, add) => {
      // A_Expr: the operator, OPERATOR(shop.+).
      add(qualifier(node.name, 'object'));
      // REINDEX SCHEMA s; CREATE PUBLICATION ... FOR TABLES IN SCHEMA s.
      if (node.kind === 'REINDEX_OBJECT_SCHEMA' || node.pubobjtype === 'PUBLICATIONOBJ_TABLES_IN_SCHEMA')
        add(str(node.name));
      if (node.name === 'search_path' && node.kind === 'VAR_SET_VALUE') searchPath(node, add);
    },
  ],
  ['objects', objects],
  ['object', objects],
  ['subname', schemaRenamed('subname')],
  ['newname', schemaRenamed('newname')],
  // ALTER ... SET SCHEMA s; IMPORT FOREIGN SCHEMA ... INTO s.
  ['newschema', (node, add) => add(str(node.newschema))],
  ['local_schema', (node, add) => add(str(node.local_schema))],
  [
    // DefElem: CREATE EXTENSION ... SCHEMA s; ALTER DEFAULT PRIVILEGES IN SCHEMA a, b; CREATE OPERATOR.
    'defname',
    (node, add) => {
      if (node.defname === 'schema') add(text(node.arg));
      if (node.defname === 'schemas') for (const schema of items(node.arg) ?? []) add(text(schema));
      const of = DEFINITION_NAMES[String(node.defname)];
      if (of) add(qualifier(node.arg, of));
    },
  ],
]);

/** Reads what a node names itself; answers its children, to be walked. */
function readNode(node: Node, add: Add): Json[] {
  const children: Json[] = [];
  for (const key in node) {
    READERS.get(key)?.(node, add);
    children.push(node[key] as Json);
  }
  return children;
}

/**
 * The schemas a parse tree names, but those every role may read, in order. Function bodies in
 * strings (`AS $$ ... $$`, DO blocks) and names in strings (`nextval('shop.s')`) are not read:
 * what they reach fails under the role chosen, as it would under public's. Walked with a list of
 * its own, not the call stack: `1 + 1 + ...` nests as deep as the SQL is long.
 */
function schemasInTree(tree: Json): string[] {
  const found = new Set<string>();
  const add: Add = (schema) => {
    if (schema !== undefined && !SHARED_SCHEMAS.has(schema)) found.add(schema);
  };
  const pending: Json[] = [tree];
  for (let value = pending.pop(); value !== undefined; value = pending.pop()) {
    const children = isNode(value) ? readNode(value, add) : Array.isArray(value) ? value : [];
    for (const child of children) if (typeof child === 'object' && child !== null) pending.push(child);
  }
  return [...found].sort();
}

export type Parser = typeof import('libpg-query');
let parser: Promise<Parser | undefined> | undefined;

/**
 * Loaded on first use, once per process: only the admin's SQL without a schema needs it. Should it
 * not load, such SQL runs in public, as it did before there was a parser, and the log says why.
 */
export function loadParser(): Promise<Parser | undefined> {
  parser ??= import('libpg-query')
    .then(async (module) => {
      await module.loadModule();
      return module;
    })
    .catch((error: unknown) => {
      logger.error('the SQL parser did not load; SQL without a schema runs in public', {
        error: loggedError(error),
      });
      return undefined;
    });
  return parser;
}

/**
 * The schemas the SQL (a statement or a script) names, or undefined when the parser cannot read
 * it (a syntax error, nesting past its stack): PostgreSQL then answers the SQL as it always did,
 * a syntax error with its position.
 */
export async function schemasNamedIn(sql: string): Promise<string[] | undefined> {
  const parse = await loadParser();
  let tree: Json | undefined;
  try {
    tree = parse?.parseSync(sql);
  } catch {
    return undefined;
  }
  return tree === undefined ? undefined : schemasInTree(tree);
}

/**
 * Where a request's SQL runs: the schema sent; else a key's own; else, for the admin's SQL as a
 * schema's role, the one schema it names, public when it names none. 400 when it names several,
 * a system schema (dbadmin's own, pg_temp: the executor's answer, which says runAs admin), or a
 * name no schema of dbadmin's can have. With the admin's own rights (runAs admin): public.
 */
export async function querySchema(request: {
  sql: string;
  schema: string | undefined;
  principal: Principal | undefined;
  adminRights: boolean;
  /** Whether a schema exists (lib/db/catalog): one only guessed from the SQL must, before a role is made for it. */
  exists: (schema: string) => Promise<boolean>;
}): Promise<string> {
  const { sql, schema, principal, adminRights } = request;
  if (schema !== undefined) return schema;
  if (principal?.kind === 'key') return principal.schema;
  if (adminRights) return DEFAULT_SCHEMA;
  const named = (await schemasNamedIn(sql)) ?? [];
  if (named.length > 1) {
    throw new BadRequest(
      'Several schemas',
      `the SQL names the schemas ${named.map((name) => `"${name}"`).join(', ')}; send "schema" to run it in one of them as that schema's role, or "runAs": "admin" to run it with the admin's rights`,
    );
  }
  const [only = DEFAULT_SCHEMA] = named;
  assertTenantSchema(only); // dbadmin's own, pg_temp: 400 that says runAs admin
  if (!isIdentifier(only)) {
    throw new BadRequest(
      'Invalid schema name',
      `the SQL names the schema "${only}", which has no role of dbadmin's to run it as (names are letters, digits and underscores, starting with a letter); send "schema", or "runAs": "admin" to run it with the admin's rights`,
    );
  }
  if (named.length === 1 && !(await request.exists(only))) {
    throw new BadRequest(
      'Schema not found',
      `the SQL names the schema "${only}", which does not exist: create schemas with POST /api/schema/create (it makes their roles too), send "runAs": "admin" to run the SQL with the admin's rights, or send "schema"`,
    );
  }
  return only;
}
