import { isProtectedSchema, schemaUser } from '#lib/admin/schemas';
import type { Config } from '#lib/config';
import { schemaNotFound } from '#lib/db/catalog';
import type { CatalogRead } from '#lib/db/catalog-read';
import { isSystemSchema } from '#lib/db/executor';
import { BadRequest, NotFound } from '#lib/errors';

/**
 * How a person connects to a schema as its own login, `<schema>_user`: psql's command and an
 * application's URL, to the server and database the service uses (or the address people use,
 * PUBLIC_DATABASE_HOST / PUBLIC_DATABASE_PORT). The password is only ever a placeholder: dbadmin
 * keeps no schema's password (PostgreSQL holds its SCRAM verifier), and never shows its own.
 */

export const PASSWORD_PLACEHOLDER = '<password>';

/** Where people reach the database. `host` is a name, an address, or a socket directory (`/...`). */
export interface DatabaseAddress {
  host: string;
  port: number;
  /** DATABASE_URL's database, when it names one (through PgBouncer, the name the pooler serves). */
  database: string | undefined;
  /** `verify-full` when the service's own connection uses TLS (lib/config withVerifiedTls). */
  sslmode: 'verify-full' | undefined;
}

/** pg's defaults for what a URL leaves out. */
const DEFAULT_HOST = 'localhost';
const DEFAULT_PORT = 5432;

export function publicAddress(
  config: Pick<Config, 'DATABASE_URL' | 'PUBLIC_DATABASE_HOST' | 'PUBLIC_DATABASE_PORT'>,
): DatabaseAddress {
  const url = new URL(config.DATABASE_URL);
  // An IPv6 address comes bracketed; a socket directory comes as `?host=`.
  const own = url.hostname.replace(/^\[(.*)\]$/, '$1') || url.searchParams.get('host') || DEFAULT_HOST;
  return {
    host: config.PUBLIC_DATABASE_HOST ?? own,
    port: config.PUBLIC_DATABASE_PORT ?? (Number(url.port) || DEFAULT_PORT),
    database: decodeURIComponent(url.pathname.slice(1)) || undefined,
    sslmode: url.searchParams.get('sslmode') === 'verify-full' ? 'verify-full' : undefined,
  };
}

/** What the catalog says of the schema's login: the schema, the role, and the database connected to. */
export interface SchemaLogin {
  user: string;
  database: string;
}

/**
 * The schema and its login role, and the database's name, in one row. The role's name is compared
 * as text: as a `name` a parameter longer than 63 bytes would be cut short and could match another.
 */
const SCHEMA_LOGIN = `
  SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1) AS schema_exists,
         EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname::text = $2 AND rolcanlogin) AS can_login,
         pg_catalog.current_database()::text AS database`;

/** A system schema has no login of its own: 400 before anything is looked up. */
function assertTenantLogin(schema: string): void {
  if (isProtectedSchema(schema) || isSystemSchema(schema))
    throw new BadRequest(
      'System schema',
      `schema "${schema}" belongs to PostgreSQL or dbadmin and has no login of its own; connection strings are for tenant schemas`,
    );
}

export const schemaLoginRead = (schema: string): CatalogRead<SchemaLogin> => ({
  name: 'dbadmin.schema-login',
  text: SCHEMA_LOGIN,
  values: [schema, schemaUser(schema)],
  schema,
  decode: (row) => {
    assertTenantLogin(schema);
    if (!row?.schema_exists) throw schemaNotFound(schema);
    const user = schemaUser(schema);
    if (!row.can_login)
      throw new NotFound(
        'Login not found',
        `schema "${schema}" has no login role "${user}" (it was not created through dbadmin); create the role, or connect with another login`,
      );
    return { user, database: String(row.database) };
  },
});

/** Encoded for a URL, `'` and the other marks encodeURIComponent leaves too: the URL can be single-quoted. */
const urlPart = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** A word for a POSIX shell, as it is. */
const shellWord = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

function postgresUrl(login: SchemaLogin, address: DatabaseAddress, password?: string): string {
  const socket = address.host.startsWith('/');
  const host = socket ? '' : address.host.includes(':') ? `[${address.host}]` : urlPart(address.host);
  const query = new URLSearchParams();
  if (socket) query.set('host', address.host);
  if (address.sslmode) query.set('sslmode', address.sslmode);
  const search = query.toString() ? `?${query.toString()}` : '';
  const credentials = password === undefined ? urlPart(login.user) : `${urlPart(login.user)}:${password}`;
  const database = address.database ?? login.database;
  return `postgresql://${credentials}@${host}:${address.port}/${urlPart(database)}${search}`;
}

export interface SchemaConnection {
  host: string;
  port: number;
  database: string;
  user: string;
  sslmode?: 'verify-full';
  psql: string;
  url: string;
}

/** The schema's connection string, for psql (it asks for the password) and for an application. */
export function connectionString(address: DatabaseAddress, login: SchemaLogin): SchemaConnection {
  return {
    host: address.host,
    port: address.port,
    database: address.database ?? login.database,
    user: login.user,
    ...(address.sslmode ? { sslmode: address.sslmode } : {}),
    psql: `psql ${shellWord(postgresUrl(login, address))}`,
    url: postgresUrl(login, address, PASSWORD_PLACEHOLDER),
  };
}
