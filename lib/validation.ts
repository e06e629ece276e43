import { z } from 'zod';
import { MAX_CONDITIONS, MAX_DEPTH } from '#lib/admin/row-filter';
import { IDENTIFIER_MAX_LENGTH, IDENTIFIER_PATTERN, identifierRule } from '#lib/db/identifiers';

/**
 * Zod schemas for the values callers send. They validate requests and, through the route tables,
 * describe them in the OpenAPI document: one source for both.
 */

export const identifier = (label: string, maxLength = IDENTIFIER_MAX_LENGTH) =>
  z
    .string()
    .max(maxLength, identifierRule(label, maxLength))
    .regex(IDENTIFIER_PATTERN, identifierRule(label, maxLength));

/** `<schemaName>_owner` (its longest role) must fit PostgreSQL's 63-character limit for names too. */
export const SCHEMA_NAME_MAX_LENGTH = IDENTIFIER_MAX_LENGTH - '_owner'.length;

export const schemaName = identifier('schema name', SCHEMA_NAME_MAX_LENGTH)
  .refine(
    (name) => !name.toLowerCase().startsWith('pg_'),
    'schema names starting with pg_ are reserved by PostgreSQL',
  )
  .meta({
    description: 'Letters, digits and underscores, starting with a letter.',
    example: 'shop',
  });

/** Characters that have a meaning in SQL text; SPEC.md asks for them to be refused in passwords. */
const SQL_META = /['"`\\;]|--|\/\*|\*\//;

export const schemaPassword = z
  .string()
  .min(8, 'password must be at least 8 characters')
  .max(128, 'password must be at most 128 characters')
  .regex(/^[\x20-\x7e]*$/, 'password must use printable ASCII characters only')
  .refine(
    (password) => !SQL_META.test(password),
    'password must not contain quotes, backticks, backslashes, semicolons or SQL comment markers (-- /* */)',
  )
  .meta({
    description:
      'At least 8 printable ASCII characters; no quotes, backslashes, semicolons or comment markers.',
  });

/** A boolean in a query string: `true`/`false` (or 1/0); anything else is an error, not `false`. */
export const queryBoolean = z
  .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
  .transform((value) => value === 'true' || value === '1');

/** A reference to an existing schema: any valid identifier (system schemas are refused later, by name). */
export const schemaRef = identifier('schema name');

/** `schema` in a query string or body: which schema an operation works in. */
export const inSchema = schemaRef
  .default('public')
  .meta({ description: 'Schema to work in; default public.' });

export const tableName = identifier('table name');

/** The SQL a request sends: a statement or a script, up to 1 MiB. */
export const sqlText = z
  .string()
  .min(1, 'sql must not be empty')
  .max(1024 * 1024);
export const columnName = identifier('column name');

/** A positive integer from a query string, within bounds. */
export const queryInt = (label: string, min: number, max: number) =>
  z.coerce
    .number()
    .int(`${label} must be a whole number`)
    .min(min, `${label} must be between ${min} and ${max}`)
    .max(max, `${label} must be between ${min} and ${max}`);

/** A column's default: a literal (string, number, boolean) or one of a few named expressions. */
export const defaultValue = z
  .union([z.string().max(10_000), z.number(), z.boolean(), z.null()])
  .optional()
  .meta({
    description:
      'A literal, or one of now(), CURRENT_TIMESTAMP, CURRENT_DATE, gen_random_uuid(), true, false.',
  });

export const columnType = z.string().min(1).max(100).meta({
  description:
    'SMALLINT, INTEGER, BIGINT, SERIAL, BIGSERIAL, DECIMAL(p,s), NUMERIC(p,s), REAL, DOUBLE PRECISION, BOOLEAN, TEXT, VARCHAR(n), CHAR(n), DATE, TIME, TIMESTAMP, TIMESTAMPTZ, UUID, JSON, JSONB, BYTEA, or the name of one of the schema’s enum types (POST /api/types)',
  example: 'VARCHAR(255)',
});

/** The `{success, message}` answer of operations that change something. */
export const Outcome = z.object({ success: z.boolean(), message: z.string() });

/** A table row as JSON: column name to value, each as lib/db/json-rows maps its type. */
export const Row = z.record(z.string(), z.unknown()).meta({
  description:
    "Column name to value, one JSON type per column type (README: Values in JSON): boolean, smallint, integer and oid as JSON's own; every other type as PostgreSQL's text for it (bigint, numeric, floats, money, dates and times to the microsecond, json and jsonb as their JSON text, bytea as \\x hex); arrays of built-in types as JSON arrays of those. Written back, a value is stored unchanged.",
});

/**
 * Which rows a request means, in PostgREST's vocabulary (lib/admin/row-filter): the query
 * parameters a page read, an export and the changes to every matching row share.
 */
export const rowFilterQuery = {
  filter: z
    .union([z.string().max(4000), z.array(z.string().max(4000))])
    // How many: lib/admin/row-filter counts every condition, and says so (zod's union would not).
    .transform((value) => (Array.isArray(value) ? value : [value]))
    .optional()
    .meta({
      description: `repeatable, ANDed: column.operator.value with eq, neq, gt, gte, lt, lte, like, ilike (* is the wildcard), in.(a,b,"c,d"), is.null|true|false|unknown, cs, cd, fts, plfts, phfts, wfts (fts(english).word), each negated by not. before it; a column name holding . , ( or ) is double-quoted. At most ${MAX_CONDITIONS} conditions in all.`,
      example: 'age.gte.18',
    }),
  or: z
    .string()
    .max(8000)
    .optional()
    .meta({
      description: `(condition,condition,and(...),not.or(...)): any of them; groups nest ${MAX_DEPTH} deep; a value holding , or ) is double-quoted`,
      example: '(age.lt.18,age.gt.65)',
    }),
  and: z
    .string()
    .max(8000)
    .optional()
    .meta({ description: 'like or, all of them', example: '(age.gte.18,name.ilike.a*)' }),
  q: z.string().max(1000).optional().meta({
    description:
      'quick search: rows where a text column holds it, case-insensitively (every column, as text, in a table without text columns)',
  }),
};
