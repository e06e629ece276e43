import { quoteLiteral } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';

/**
 * The column types a caller may ask for, by the names callers use; each maps to PostgreSQL's
 * spelling and says which modifiers it takes. Nothing else reaches a CREATE/ALTER statement.
 */
const TYPES: Record<string, { sql: string; modifiers: 'none' | 'length' | 'precision' }> = {
  SMALLINT: { sql: 'smallint', modifiers: 'none' },
  INT2: { sql: 'smallint', modifiers: 'none' },
  INTEGER: { sql: 'integer', modifiers: 'none' },
  INT: { sql: 'integer', modifiers: 'none' },
  INT4: { sql: 'integer', modifiers: 'none' },
  BIGINT: { sql: 'bigint', modifiers: 'none' },
  INT8: { sql: 'bigint', modifiers: 'none' },
  SERIAL: { sql: 'serial', modifiers: 'none' },
  BIGSERIAL: { sql: 'bigserial', modifiers: 'none' },
  DECIMAL: { sql: 'numeric', modifiers: 'precision' },
  NUMERIC: { sql: 'numeric', modifiers: 'precision' },
  REAL: { sql: 'real', modifiers: 'none' },
  FLOAT4: { sql: 'real', modifiers: 'none' },
  'DOUBLE PRECISION': { sql: 'double precision', modifiers: 'none' },
  FLOAT8: { sql: 'double precision', modifiers: 'none' },
  BOOLEAN: { sql: 'boolean', modifiers: 'none' },
  BOOL: { sql: 'boolean', modifiers: 'none' },
  TEXT: { sql: 'text', modifiers: 'none' },
  VARCHAR: { sql: 'varchar', modifiers: 'length' },
  'CHARACTER VARYING': { sql: 'varchar', modifiers: 'length' },
  CHAR: { sql: 'char', modifiers: 'length' },
  CHARACTER: { sql: 'char', modifiers: 'length' },
  DATE: { sql: 'date', modifiers: 'none' },
  TIME: { sql: 'time', modifiers: 'none' },
  TIMESTAMP: { sql: 'timestamp', modifiers: 'none' },
  TIMESTAMPTZ: { sql: 'timestamptz', modifiers: 'none' },
  UUID: { sql: 'uuid', modifiers: 'none' },
  JSON: { sql: 'json', modifiers: 'none' },
  JSONB: { sql: 'jsonb', modifiers: 'none' },
  BYTEA: { sql: 'bytea', modifiers: 'none' },
};

export const ALLOWED_TYPES = Object.keys(TYPES);

/**
 * `NAME [WORDS] [(n[, m])]`, spaces around its parts: a name's words are separated by spaces no
 * other part can take, so no run of spaces can be split two ways (the lazy name of old was cubic).
 */
const TYPE_PATTERN =
  /^\s*([A-Za-z][A-Za-z0-9]*(?: +[A-Za-z0-9]+)*)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*)?$/;
/** Longer type text is refused before the pattern reads it (lib/validation's columnType: 100). */
const MAX_TYPE_TEXT = 100;
const typeParts = (type: string) => (type.length <= MAX_TYPE_TEXT ? TYPE_PATTERN.exec(type) : null);
const MAX_LENGTH = 10_485_760; // PostgreSQL's limit for varchar(n)
const MAX_PRECISION = 1000;

const invalidType = (message: string) => new BadRequest('Invalid column type', message);

function withLength(name: string, sql: string, first?: number, second?: number, length?: number): string {
  if (second !== undefined) throw invalidType(`type ${name} takes one length, not two`);
  if (first !== undefined && length !== undefined && first !== length) {
    throw invalidType(`type ${name}(${first}) and length ${length} disagree`);
  }
  const n = first ?? length;
  if (n === undefined) return sql;
  if (n < 1 || n > MAX_LENGTH) throw invalidType(`length must be between 1 and ${MAX_LENGTH}`);
  return `${sql}(${n})`;
}

function withPrecision(name: string, sql: string, first?: number, second?: number, length?: number): string {
  if (length !== undefined)
    throw invalidType(`type ${name} takes a precision in its name, e.g. ${name}(10,2)`);
  if (first === undefined) return sql;
  if (first < 1 || first > MAX_PRECISION)
    throw invalidType(`precision must be between 1 and ${MAX_PRECISION}`);
  if (second !== undefined && second > first) throw invalidType('scale must not exceed precision');
  return second === undefined ? `${sql}(${first})` : `${sql}(${first},${second})`;
}

/** The schema's own enum types a column may also be: the name as given → its SQL, schema-qualified. */
export type EnumTypes = ReadonlyMap<string, string>;

const NO_ENUMS: EnumTypes = new Map();

/** Whether the type is one of the allow-list's (a schema's enum type is looked up apart). */
export const isAllowListed = (type: string) => {
  const match = typeParts(type);
  return !!match && TYPES[match[1]?.replace(/\s+/g, ' ').toUpperCase() ?? ''] !== undefined;
};

/**
 * `VARCHAR(255)`, `decimal(10, 2)`, `TEXT`... -> the SQL type, from the allow-list, or one of the
 * schema's enum types (`enums`, read from the catalog by the caller). `length` (SPEC.md's separate
 * field) is accepted for VARCHAR/CHAR when the type has none.
 */
export function columnTypeSql(type: string, length?: number, enums: EnumTypes = NO_ENUMS): string {
  const own = enums.get(type);
  if (own !== undefined) {
    if (length !== undefined) throw invalidType(`enum type ${type} takes no length`);
    return own;
  }
  const match = typeParts(type);
  const name = match?.[1]?.replace(/\s+/g, ' ').toUpperCase() ?? '';
  const spec = TYPES[name];
  if (!match || !spec)
    throw invalidType(
      `type "${type}" is not supported; use one of ${ALLOWED_TYPES.join(', ')}, or an enum type of the schema`,
    );
  const [first, second] = [match[2], match[3]].map((n) => (n === undefined ? undefined : Number(n)));
  switch (spec.modifiers) {
    case 'length':
      return withLength(name, spec.sql, first, second, length);
    case 'precision':
      return withPrecision(name, spec.sql, first, second, length);
    default:
      if (first !== undefined || length !== undefined)
        throw invalidType(`type ${name} takes no length or precision`);
      return spec.sql;
  }
}

/** Expressions a default may be, as written; anything else is a literal. */
const DEFAULT_EXPRESSIONS: Record<string, string> = {
  'NOW()': 'now()',
  CURRENT_TIMESTAMP: 'CURRENT_TIMESTAMP',
  CURRENT_DATE: 'CURRENT_DATE',
  CURRENT_TIME: 'CURRENT_TIME',
  LOCALTIMESTAMP: 'LOCALTIMESTAMP',
  'GEN_RANDOM_UUID()': 'gen_random_uuid()',
  TRUE: 'true',
  FALSE: 'false',
  NULL: 'NULL',
};

/**
 * The DEFAULT clause's expression: one of a few named expressions, or else a quoted literal,
 * which PostgreSQL converts to the column's type (so '42' serves an integer column, and "0042"
 * stays "0042" in a text one).
 */
export function defaultSql(value: string | number | boolean): string {
  if (typeof value === 'number' || typeof value === 'boolean') return quoteLiteral(String(value));
  return DEFAULT_EXPRESSIONS[value.trim().toUpperCase()] ?? quoteLiteral(value);
}
