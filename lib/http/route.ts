import type { z } from 'zod';
import type { Permission } from '#lib/access';
import type { AuditDraft } from '#lib/db/audit-log';
import type { CatalogRead } from '#lib/db/catalog-read';
import type { SchemaAccess } from '#lib/db/executor';
import type { Download } from '#lib/download';
import type { Answer } from '#lib/http/answers';
import type { Asset } from '#lib/http/asset';
import type { Redirect, Reply } from '#lib/http/respond';
import type { Upload, UploadRule } from '#lib/http/upload';
import type { JsonText } from '#lib/json-text';
import type { Principal } from '#lib/principal';

/**
 * What a route is: its method and path, who may call it, its zod schemas, the answers it documents,
 * its audit declaration, and the one lib call it makes with the request's input.
 */

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: anyone; the admin and people only, no key; any key of the schema (reads);
 * `service_role` keys too (writes); whoever holds METRICS_TOKEN too (the metrics); or a person
 * about their own account (`person`: the AUTH_USER administrator answers for itself where it can).
 * What a person may do besides is their role's (`permission`, lib/access).
 */
export type Access = 'public' | 'admin' | 'read' | 'write' | 'metrics' | 'person';

export interface RouteInput<P, Q, B, C = undefined> {
  params: P;
  query: Q;
  body: B;
  /** What the route's catalog read found (`reads`); undefined for a route without one. */
  read: C;
  principal: Principal | undefined;
  /** Aborted when the request must end early (Lambda about to time out). */
  signal: AbortSignal | undefined;
  /** The caller's address as API Gateway saw it (or, behind TRUSTED_PROXIES, as they say). */
  clientAddress: string | undefined;
  /** The browser reached us over HTTPS (lib/http/session-cookie): a session's cookie is then Secure. */
  overHttps: boolean;
  /** The User-Agent header, for a person's list of their sessions. */
  userAgent: string | undefined;
  /** The request's cookie of this name, if it carries one. */
  cookie(name: string): string | undefined;
  /** The browser navigated here (it accepts HTML): a route may answer it with a page to go to. */
  navigating: boolean;
  /** The file a route with `upload` was sent. */
  upload: Upload | undefined;
  /**
   * The request's audit entry while it is to be written (lib/http/audit), undefined for a request
   * that is not audited: the lib call that makes the change commits it with the change.
   */
  audit: AuditDraft | undefined;
  /** Where the principal's SQL in `schema` runs (lib/db/executor schemaAccess), `audit` with it. */
  accessTo(schema: string): Promise<SchemaAccess>;
}

/**
 * One endpoint: its contract (zod schemas, used for validation and for the OpenAPI document),
 * who may call it, and the one lib call it makes.
 */
export interface Route<P = unknown, Q = unknown, B = unknown, R = unknown, C = undefined> {
  method: Method;
  /** API Gateway syntax: `/api/schema/{schemaName}`. */
  path: string;
  summary: string;
  access: Access;
  /**
   * What a person's role must hold to call it (lib/access). Left out: `read` for read access,
   * `write` for write access, `metrics` for the metrics; an admin route must say.
   */
  permission?: Permission;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** The body is a file (or part of one), taken as bytes, rather than JSON. */
  upload?: UploadRule;
  response: z.ZodType<R>;
  /** Status on success; 200 unless stated. */
  status?: number;
  /** A non-JSON media type the route may answer with instead (see lib/download). */
  alsoProduces?: string;
  /**
   * The error statuses of the route's own work, with why (lib/http/answers). Those its access,
   * inputs and body give (400, 401, 402, 403 for keys, 413, 415, 429...) are added from the route
   * itself (lib/http/openapi).
   */
  errors?: readonly Answer[];
  /** Served whatever the license's state (SPEC.md exempts the license endpoints from the gate). */
  ungated?: boolean;
  /**
   * The catalog read the route's work starts with, by its path and query. It travels with the
   * request's sign-in read, one round trip for both (lib/http/authenticate), and runs alone when it
   * could not (a key that leaves `schema` to default); the handler gets what it found as `read`.
   */
  reads?: (input: { params: P; query: Q }) => CatalogRead<C>;
  /**
   * The route's audit entry (lib/http/audit): what it is called and what it changes. Every route
   * but GET changes something and must say so; `false` for one that changes nothing.
   */
  audit?: RouteAudit<P, Q, B, R> | false;
  /** It adds data to its schema: refused (507) while the schema is over its storage quota. */
  addsData?: boolean;
  /**
   * A client may send it again (its answer lost): it takes an Idempotency-Key, and a retry with
   * the key answers the first answer instead of writing twice (lib/http/idempotency). `shownOnce`
   * names a field of the answer that is never kept (a key's secret).
   */
  idempotent?: true | { shownOnce: string };
  /** Its success sets or clears the console session's cookie (documented as Set-Cookie). */
  setsCookie?: true;
  handler: (input: RouteInput<P, Q, B, C>) => Promise<R | Rendered>;
}

export interface RouteAudit<P, Q, B, R = unknown> {
  /** `row.insert`, `schema.delete`, ... */
  action: string;
  /** What it changes, by name (a table, a key's id): never a row's values. */
  target?: (input: { params: P; query: Q; body: B }) => string | undefined;
  /** For a route that answers a refusal as a success (`{success: false}`): whether it changed anything. */
  changed?: (result: R) => boolean;
}

/**
 * What lib/http sends as it is, in place of the response schema's JSON: a file, JSON PostgreSQL
 * rendered (lib/json-text), an asset.
 */
export type Rendered = Download | JsonText | Asset | Reply | Redirect;

// biome-ignore lint/suspicious/noExplicitAny: a table of routes holds routes of every input type.
export type AnyRoute = Route<any, any, any, any, any>;

/** What a person must be granted to call the route (lib/access); undefined: any person, about themselves. */
export function permissionOf(route: AnyRoute): Permission | undefined {
  if (route.permission) return route.permission;
  const implied: Partial<Record<Access, Permission>> = { read: 'read', write: 'write', metrics: 'metrics' };
  return implied[route.access];
}

/**
 * Whether the license gate stands before the route: every authenticated one but those exempt, and
 * a person's own account (signing in and out, their password, sessions and tokens), which the
 * console needs to reach the license page at all.
 */
export const behindLicenseGate = (route: AnyRoute) =>
  route.access !== 'public' && route.access !== 'person' && !route.ungated;

/**
 * Authenticated POSTs must say they are JSON, body or not: see lib/http/json-body jsonContentType.
 * An upload's own content types need the browser to ask first just the same (lib/http/upload).
 */
export const requiresJsonContentType = (route: AnyRoute) =>
  route.method === 'POST' && route.access !== 'public' && !route.upload;

/** Identity at run time; lets TypeScript infer the handler's input types from the schemas. */
export const defineRoute = <P = undefined, Q = undefined, B = undefined, R = unknown, C = undefined>(
  route: Route<P, Q, B, R, C>,
): Route<P, Q, B, R, C> => route;
