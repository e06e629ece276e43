import { type Json, loadParser, schemasNamedIn } from '#lib/admin/query-schema';
import type { LockLevel } from '#lib/admin/schema-change';
import { BadRequest, ServiceUnavailable } from '#lib/errors';

/**
 * A migration's SQL read with PostgreSQL's own parser before it reaches any schema: its
 * statements, the lock each takes on each table (the documentation's levels, per ALTER TABLE
 * subcommand as lib/admin/schema-change's preview names them), whether it may rewrite a table,
 * and a refusal for what cannot run the same way in every schema: transaction control (each
 * schema's run is one transaction of its own), CONCURRENTLY and VACUUM (which refuse a
 * transaction), a role or search path of its own, and names qualified with a schema (each run
 * has its schema alone on the search path: `items`, never `acme.items`).
 */

export interface PlannedLock {
  table: string;
  level: LockLevel;
}

export interface PlannedStatement {
  sql: string;
  kind: string;
  locks: PlannedLock[];
  /** Every row may be written anew (a type change, a column with a volatile default). */
  mayRewrite: boolean;
}

type Node = { [key: string]: Json };
const isNode = (value: Json | undefined): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const field = (node: Json | undefined, key: string): Json | undefined =>
  isNode(node) ? node[key] : undefined;
const relationName = (relation: Json | undefined) => String(field(relation, 'relname') ?? '?');

/** ALTER TABLE subcommands that take less than ACCESS EXCLUSIVE (PostgreSQL's AlterTableGetLockLevel). */
const SUBCOMMAND_LOCKS: Record<string, LockLevel> = {
  AT_SetStatistics: 'SHARE UPDATE EXCLUSIVE',
  AT_SetOptions: 'SHARE UPDATE EXCLUSIVE',
  AT_ResetOptions: 'SHARE UPDATE EXCLUSIVE',
  AT_ClusterOn: 'SHARE UPDATE EXCLUSIVE',
  AT_DropCluster: 'SHARE UPDATE EXCLUSIVE',
  AT_ValidateConstraint: 'SHARE UPDATE EXCLUSIVE',
  AT_AttachPartition: 'SHARE UPDATE EXCLUSIVE',
  AT_EnableTrig: 'SHARE ROW EXCLUSIVE',
  AT_EnableAlwaysTrig: 'SHARE ROW EXCLUSIVE',
  AT_EnableReplicaTrig: 'SHARE ROW EXCLUSIVE',
  AT_EnableTrigAll: 'SHARE ROW EXCLUSIVE',
  AT_EnableTrigUser: 'SHARE ROW EXCLUSIVE',
  AT_DisableTrig: 'SHARE ROW EXCLUSIVE',
  AT_DisableTrigAll: 'SHARE ROW EXCLUSIVE',
  AT_DisableTrigUser: 'SHARE ROW EXCLUSIVE',
};

/** Defaults that are constants or stable calls keep ADD COLUMN a catalog change; others may rewrite. */
const STABLE_DEFAULTS = new Set(['now', 'current_timestamp', 'current_date', 'transaction_timestamp']);

function alterTable(node: Node): Pick<PlannedStatement, 'locks' | 'mayRewrite'> {
  const table = relationName(node.relation);
  const locks: PlannedLock[] = [];
  let mayRewrite = false;
  for (const entry of (node.cmds as Json[] | undefined) ?? []) {
    const cmd = field(entry, 'AlterTableCmd');
    const subtype = String(field(cmd, 'subtype') ?? '');
    const def = field(cmd, 'def');
    const constraint = field(def, 'Constraint');
    if (subtype === 'AT_AddConstraint' && field(constraint, 'contype') === 'CONSTR_FOREIGN') {
      locks.push({ table, level: 'SHARE ROW EXCLUSIVE' });
      locks.push({ table: relationName(field(constraint, 'pktable')), level: 'SHARE ROW EXCLUSIVE' });
      continue;
    }
    locks.push({ table, level: SUBCOMMAND_LOCKS[subtype] ?? 'ACCESS EXCLUSIVE' });
    if (subtype === 'AT_AlterColumnType' || subtype === 'AT_SetLogged' || subtype === 'AT_SetUnLogged')
      mayRewrite = true;
    if (subtype === 'AT_AddColumn') mayRewrite ||= rewritingColumn(field(def, 'ColumnDef'));
  }
  return { locks, mayRewrite };
}

function rewritingColumn(column: Json | undefined): boolean {
  for (const entry of (field(column, 'constraints') as Json[] | undefined) ?? []) {
    const constraint = field(entry, 'Constraint');
    const type = field(constraint, 'contype');
    if (type === 'CONSTR_IDENTITY' || type === 'CONSTR_GENERATED') return true;
    if (type !== 'CONSTR_DEFAULT') continue;
    const call = field(field(constraint, 'raw_expr'), 'FuncCall');
    if (!call) continue;
    const names = (field(call, 'funcname') as Json[] | undefined) ?? [];
    const name = String(field(field(names[names.length - 1], 'String'), 'sval') ?? '');
    if (!STABLE_DEFAULTS.has(name)) return true;
  }
  return false;
}

const dropped = (node: Node): PlannedLock[] =>
  ((node.objects as Json[] | undefined) ?? []).map((object) => {
    const items = (field(field(object, 'List'), 'items') as Json[] | undefined) ?? [];
    return {
      table: String(field(field(items[items.length - 1], 'String'), 'sval') ?? '?'),
      level: 'ACCESS EXCLUSIVE',
    };
  });

const TABLE_DROPS = new Set([
  'OBJECT_TABLE',
  'OBJECT_VIEW',
  'OBJECT_MATVIEW',
  'OBJECT_INDEX',
  'OBJECT_SEQUENCE',
]);

/** The locks a statement takes on tables the schema already holds. */
function locksOf(name: string, node: Node): Pick<PlannedStatement, 'locks' | 'mayRewrite'> {
  const on = (level: LockLevel) => ({
    locks: [{ table: relationName(node.relation), level }],
    mayRewrite: false,
  });
  switch (name) {
    case 'AlterTableStmt':
      return alterTable(node);
    case 'IndexStmt':
      return on('SHARE');
    case 'CreateTrigStmt':
      return on('SHARE ROW EXCLUSIVE');
    case 'RuleStmt':
    case 'RenameStmt':
      return node.relation ? on('ACCESS EXCLUSIVE') : { locks: [], mayRewrite: false };
    case 'DropStmt':
      return { locks: TABLE_DROPS.has(String(node.removeType)) ? dropped(node) : [], mayRewrite: false };
    case 'TruncateStmt':
      return {
        locks: ((node.relations as Json[] | undefined) ?? []).map((relation) => ({
          table: relationName(field(relation, 'RangeVar')),
          level: 'ACCESS EXCLUSIVE' as const,
        })),
        mayRewrite: false,
      };
    case 'InsertStmt':
    case 'UpdateStmt':
    case 'DeleteStmt':
    case 'MergeStmt':
      return on('ROW EXCLUSIVE');
    default:
      return { locks: [], mayRewrite: false };
  }
}

/** Why a statement cannot be one of a migration's, or undefined. */
function refusal(name: string, node: Node): string | undefined {
  if (name === 'TransactionStmt')
    return 'each schema runs the migration in one transaction of its own: leave out BEGIN, COMMIT, ROLLBACK and savepoints';
  if (node.concurrent === true)
    return 'CONCURRENTLY cannot run inside a transaction, and each schema runs the migration in one';
  if (name === 'VacuumStmt') return 'VACUUM and ANALYZE cannot run inside a transaction';
  if (name === 'ReindexStmt' && JSON.stringify(node.params ?? []).includes('"concurrently"'))
    return 'REINDEX CONCURRENTLY cannot run inside a transaction, and each schema runs the migration in one';
  if (name === 'VariableSetStmt' && node.kind === 'VAR_RESET_ALL')
    return "RESET ALL would drop the migration's lock timeout: leave it out";
  if (
    name === 'VariableSetStmt' &&
    ['role', 'session_authorization', 'search_path'].includes(String(node.name))
  )
    return `a migration runs with its schema's role and its schema alone on the search path: leave out SET ${String(node.name)}`;
  if (name === 'CopyStmt' && node.filename === undefined)
    return 'COPY from or to the client cannot run in a migration';
  return undefined;
}

const statementKind = (name: string) =>
  name
    .replace(/Stmt$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();

/** The migration's statements and their locks; a 400 naming what cannot run in every schema. */
export async function planStatements(sql: string): Promise<PlannedStatement[]> {
  const parser = await loadParser();
  if (!parser) throw new ServiceUnavailable('Parser unavailable', 'the SQL parser did not load; try again');
  let tree: Json;
  try {
    tree = parser.parseSync(sql) as Json;
  } catch (error) {
    throw new BadRequest('Invalid SQL', `the migration's SQL does not parse: ${(error as Error).message}`);
  }
  const entries = (field(tree, 'stmts') as Json[] | undefined) ?? [];
  if (entries.length === 0) throw new BadRequest('Invalid SQL', 'the migration has no statements');
  // public holds what extensions installed (uuid_generate_v4): every schema's run may name it.
  const named = ((await schemasNamedIn(sql)) ?? []).filter((schema) => schema !== 'public');
  if (named.length > 0) {
    throw new BadRequest(
      'Invalid SQL',
      `the migration names schema ${named.map((s) => `"${s}"`).join(', ')}: name objects unqualified, as each schema's run has its own schema alone on the search path`,
    );
  }
  // Positions are in bytes of the UTF-8 text.
  const bytes = Buffer.from(sql);
  return entries.map((entry) => {
    const [name = '', node = {}] = Object.entries((field(entry, 'stmt') as Node | undefined) ?? {})[0] ?? [];
    const start = Number(field(entry, 'stmt_location') ?? 0);
    const length = Number(field(entry, 'stmt_len') ?? 0);
    const text = bytes
      .subarray(start, length > 0 ? start + length : bytes.length)
      .toString()
      .trim();
    const why = isNode(node) ? refusal(name, node) : undefined;
    if (why) throw new BadRequest('Invalid SQL', `"${text.slice(0, 120)}": ${why}`);
    return {
      sql: text,
      kind: statementKind(name),
      ...(isNode(node) ? locksOf(name, node) : { locks: [], mayRewrite: false }),
    };
  });
}
