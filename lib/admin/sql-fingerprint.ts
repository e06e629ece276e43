import { createHash } from 'node:crypto';
import { type Json, loadParser } from '#lib/admin/query-schema';

/**
 * What the audit log keeps of ad-hoc SQL by default: its statements' kinds (`INSERT`, `CREATE
 * TABLE`) and a fingerprint, read with PostgreSQL's own parser. The fingerprint is the parse tree
 * with every constant and position taken out, hashed (as pg_stat_statements' query id is), so
 * the same statement with other values has the same fingerprint, and no value can be read back
 * from it.
 */
export interface SqlDescription {
  kind: string;
  fingerprint?: string;
}

/** Statements whose node name does not say what they do in PostgreSQL's own words. */
const NAMED: Record<string, string> = {
  CreateStmt: 'CREATE TABLE',
  IndexStmt: 'CREATE INDEX',
  ViewStmt: 'CREATE VIEW',
  VariableSetStmt: 'SET',
  VariableShowStmt: 'SHOW',
  DoStmt: 'DO',
  CopyStmt: 'COPY',
  ExplainStmt: 'EXPLAIN',
  TransactionStmt: 'TRANSACTION',
};

const isObject = (value: Json | undefined): value is { [key: string]: Json } =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `AlterTableStmt` -> `ALTER TABLE`; `DropStmt` of tables -> `DROP TABLE`. */
function kindOf(statement: Json | undefined): string {
  if (!isObject(statement)) return 'UNKNOWN';
  const [name = 'Unknown', node] = Object.entries(statement)[0] ?? [];
  if (name === 'DropStmt' && isObject(node) && typeof node.removeType === 'string')
    return `DROP ${node.removeType.replace(/^OBJECT_/, '').replace(/_/g, ' ')}`;
  return (
    NAMED[name] ??
    name
      .replace(/Stmt$/, '')
      .replace(/([a-z])([A-Z])/g, '$1 $2')
      .toUpperCase()
  );
}

/**
 * Where a statement holds values rather than names: a constant; an option's argument (a role's
 * PASSWORD, a function's or DO block's body); a comment's text.
 */
const VALUES_IN: Record<string, string> = { DefElem: 'arg', CommentStmt: 'comment' };

function literal(key: string, child: Json): Json {
  if (key === 'A_Const') return '?';
  const field = VALUES_IN[key];
  return field && isObject(child) && field in child ? { ...child, [field]: '?' } : child;
}

/** The tree without positions, and every constant as `?`: walked with a list, not the stack. */
function normalized(tree: Json): Json {
  const strip = (value: Json): Json => {
    if (Array.isArray(value)) return value.map(strip);
    if (!isObject(value)) return value;
    const out: { [key: string]: Json } = {};
    for (const [key, child] of Object.entries(value)) {
      if (key === 'location' || key === 'stmt_location' || key === 'stmt_len') continue;
      out[key] = literal(key, child);
    }
    return out;
  };
  // Copy level by level, so a deeply nested expression cannot exhaust the stack.
  const root = strip(tree);
  const pending: Json[] = [root];
  for (let value = pending.pop(); value !== undefined; value = pending.pop()) {
    const children = Array.isArray(value) ? value : isObject(value) ? value : undefined;
    if (!children) continue;
    for (const [key, child] of Object.entries(children)) {
      const copied = strip(child as Json);
      (children as Record<string, Json>)[key] = copied;
      pending.push(copied);
    }
  }
  return root;
}

/** Statements sent again (an application's own) are described once: the last CACHED of them. */
const CACHED = 500;
const CACHEABLE_LENGTH = 4096;
const described = new Map<string, SqlDescription>();

/** Kinds and fingerprint; the kind alone (`UNKNOWN`) when the parser cannot read the SQL. */
export async function describeSql(sql: string): Promise<SqlDescription> {
  const known = described.get(sql);
  if (known) return known;
  const description = await parsedDescription(sql);
  if (sql.length <= CACHEABLE_LENGTH) {
    if (described.size >= CACHED) described.delete(described.keys().next().value as string);
    described.set(sql, description);
  }
  return description;
}

async function parsedDescription(sql: string): Promise<SqlDescription> {
  const parser = await loadParser();
  let tree: Json;
  try {
    tree = parser?.parseSync(sql) as Json;
  } catch {
    return { kind: 'UNKNOWN' };
  }
  if (!isObject(tree) || !Array.isArray(tree.stmts)) return { kind: 'UNKNOWN' };
  const kinds = tree.stmts.map((entry) => kindOf(isObject(entry) ? entry.stmt : undefined));
  const kind = [...new Set(kinds)].join(', ');
  try {
    const fingerprint = createHash('sha256')
      .update(JSON.stringify(normalized(tree.stmts)))
      .digest('hex')
      .slice(0, 16);
    return { kind, fingerprint };
  } catch {
    // Nested deeper than JSON.stringify goes: the kind alone.
    return { kind };
  }
}
