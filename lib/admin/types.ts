import type pg from 'pg';
import type { Change } from '#lib/admin/schema-change';
import { schemaNotFound } from '#lib/db/catalog';
import { type EnumTypes, isAllowListed } from '#lib/db/column-types';
import { assertTenantSchema } from '#lib/db/executor';
import { quoteCatalogName, quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { BadRequest, NotFound } from '#lib/errors';

/**
 * A schema's enum types: listed from the catalog, created and grown as lib/admin/schema-change
 * runs a change, as the schema's role. CREATE TYPE and ALTER TYPE take no bind parameters, so a
 * value is written as a literal, through quoteLiteral only. Neither locks a table: ALTER TYPE ...
 * ADD VALUE locks the type alone (since PostgreSQL 12 it may run in a transaction, but the new
 * value cannot be used before that transaction commits; ours commits at once).
 */

/** PostgreSQL's limit on an enum label (NAMEDATALEN - 1 bytes). */
export const ENUM_VALUE_MAX_BYTES = 63;

/** pg_type and pg_enum only: no lock, no function of the schema. */
const ENUMS = `
  SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists,
         (SELECT coalesce(json_agg(json_build_object(
                    'name', t.typname,
                    'values', (SELECT coalesce(json_agg(e.enumlabel ORDER BY e.enumsortorder), '[]')
                                 FROM pg_enum e WHERE e.enumtypid = t.oid),
                    'comment', d.description
                  ) ORDER BY t.typname), '[]')
            FROM pg_type t
            JOIN pg_namespace n ON n.oid = t.typnamespace
            LEFT JOIN pg_description d ON d.objoid = t.oid AND d.classoid = 'pg_type'::regclass AND d.objsubid = 0
           WHERE n.nspname = $1 AND t.typtype = 'e') AS types`;

export interface EnumType {
  name: string;
  values: string[];
  comment: string | null;
}

export async function listEnums(catalog: pg.Pool, schema: string) {
  const { rows } = await catalog.query<{ schema_exists: boolean; types: EnumType[] }>({
    name: 'dbadmin.enums',
    text: ENUMS,
    values: [schema],
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  return { schema, types: rows[0].types };
}

async function findEnum(catalog: pg.Pool, schema: string, name: string): Promise<EnumType | undefined> {
  const { types } = await listEnums(catalog, schema);
  return types.find((t) => t.name === name);
}

function checkValues(values: string[]): void {
  for (const value of values) {
    if (Buffer.byteLength(value) > ENUM_VALUE_MAX_BYTES) {
      throw new BadRequest('Invalid value', `an enum value is at most ${ENUM_VALUE_MAX_BYTES} bytes`);
    }
  }
  const repeated = values.find((value, at) => values.indexOf(value) !== at);
  if (repeated !== undefined) {
    throw new BadRequest('Duplicate value', `the value ${JSON.stringify(repeated)} is listed twice`);
  }
}

const qualifiedType = (schema: string, name: string) =>
  `${quoteIdent(schema, 'schema name')}.${quoteIdent(name, 'type name')}`;

export async function planCreateEnum(
  catalog: pg.Pool,
  input: { schema: string; name: string; values: string[] },
): Promise<Change> {
  assertTenantSchema(input.schema);
  checkValues(input.values);
  const { rows } = await catalog.query<{ schema_exists: boolean; taken: boolean }>({
    name: 'dbadmin.type-name-taken',
    text: `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists,
                  EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                           WHERE n.nspname = $1 AND t.typname = $2) AS taken`,
    values: [input.schema, input.name],
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(input.schema);
  if (rows[0].taken) {
    throw new BadRequest('Already exists', `schema "${input.schema}" already has a type "${input.name}"`);
  }
  const values = input.values.map(quoteLiteral).join(', ');
  return {
    summary: `enum type "${input.name}" created with ${input.values.length} value${input.values.length === 1 ? '' : 's'}`,
    statements: [`CREATE TYPE ${qualifiedType(input.schema, input.name)} AS ENUM (${values})`],
    locks: [],
    rewrites: false,
    scans: false,
  };
}

export interface AddEnumValueInput {
  schema: string;
  type: string;
  value: string;
  before?: string | undefined;
  after?: string | undefined;
}

/** Where the new value goes: before or after an existing one, or last. */
function placement(input: AddEnumValueInput, existing: EnumType): string {
  if (input.before !== undefined && input.after !== undefined) {
    throw new BadRequest('Invalid placement', 'give before or after, not both');
  }
  const [word, anchor] = input.before !== undefined ? ['BEFORE', input.before] : ['AFTER', input.after];
  if (anchor === undefined) return '';
  if (!existing.values.includes(anchor)) {
    throw new BadRequest('Unknown value', `type "${existing.name}" has no value ${JSON.stringify(anchor)}`);
  }
  return ` ${word} ${quoteLiteral(anchor)}`;
}

export async function planAddEnumValue(catalog: pg.Pool, input: AddEnumValueInput): Promise<Change> {
  assertTenantSchema(input.schema);
  checkValues([input.value]);
  const existing = await findEnum(catalog, input.schema, input.type);
  if (!existing) {
    throw new NotFound('Type not found', `schema "${input.schema}" has no enum type "${input.type}"`);
  }
  if (existing.values.includes(input.value)) {
    throw new BadRequest(
      'Already exists',
      `type "${input.type}" already has the value ${JSON.stringify(input.value)}`,
    );
  }
  const where = placement(input, existing);
  return {
    summary: `value ${JSON.stringify(input.value)} added to enum type "${input.type}"`,
    statements: [
      `ALTER TYPE ${qualifiedType(input.schema, input.type)} ADD VALUE ${quoteLiteral(input.value)}${where}`,
    ],
    locks: [],
    rewrites: false,
    scans: false,
  };
}

/**
 * The schema's enum types among `types` (those the allow-list does not name), as columnTypeSql
 * takes them: one catalog query, only when some type is not the allow-list's.
 */
export async function enumTypesAmong(catalog: pg.Pool, schema: string, types: string[]): Promise<EnumTypes> {
  const names = [...new Set(types.filter((type) => !isAllowListed(type)))];
  if (names.length === 0) return new Map();
  const { rows } = await catalog.query<{ name: string }>(
    `SELECT t.typname::text AS name FROM pg_catalog.pg_type t
       JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
      WHERE n.nspname = $1 AND t.typname = ANY($2::text[]) AND t.typtype = 'e'`,
    [schema, names],
  );
  return new Map(rows.map((r) => [r.name, `${quoteCatalogName(schema)}.${quoteCatalogName(r.name)}`]));
}
