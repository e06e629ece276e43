import { ApiError, Busy, ServiceUnavailable } from '#lib/errors';

/** The fields of a PostgreSQL error that pg exposes. */
export interface PgError extends Error {
  code: string;
  detail?: string;
  hint?: string;
  position?: string;
  /** The schema of the object the error is about (a constraint's table), where PostgreSQL says. */
  schema?: string;
  /** The call stack it was raised in (PL/pgSQL functions, triggers), innermost first. */
  where?: string;
}

interface Mapping {
  status: number;
  title: string;
}

/** SQLSTATE -> response, in one table. Exact codes first, then whole classes (first two chars). */
const BY_CODE: Record<string, Mapping> = {
  '42P01': { status: 404, title: 'Table not found' },
  '3F000': { status: 404, title: 'Schema not found' },
  '42703': { status: 400, title: 'Unknown column' },
  '42601': { status: 400, title: 'Invalid SQL' },
  '42P06': { status: 400, title: 'Already exists' },
  '42P07': { status: 400, title: 'Already exists' },
  '42701': { status: 400, title: 'Already exists' },
  '42710': { status: 400, title: 'Already exists' },
  '42501': { status: 403, title: 'Forbidden' },
  '23502': { status: 400, title: 'Missing value' },
  '23503': { status: 400, title: 'Foreign key violation' },
  '23505': { status: 400, title: 'Duplicate value' },
  '23514': { status: 400, title: 'Check violation' },
  '2BP01': { status: 400, title: 'Dependent objects exist' },
  '25006': { status: 403, title: 'Read-only' },
  '57014': { status: 400, title: 'Query timeout' },
  '40001': { status: 409, title: 'Conflict' },
  '40P01': { status: 409, title: 'Conflict' },
  '55P03': { status: 409, title: 'Lock not available' },
  '57P01': { status: 503, title: 'Database unavailable' },
  '57P02': { status: 503, title: 'Database unavailable' },
  '57P03': { status: 503, title: 'Database unavailable' },
};

const BY_CLASS: Record<string, Mapping> = {
  '08': { status: 503, title: 'Database unavailable' },
  '53': { status: 503, title: 'Database unavailable' },
  '22': { status: 400, title: 'Invalid value' },
  '23': { status: 400, title: 'Constraint violation' },
  '42': { status: 400, title: 'Invalid SQL' },
  '0A': { status: 400, title: 'Not supported' },
  '55': { status: 400, title: 'Not possible now' },
  '25': { status: 400, title: 'Invalid transaction state' },
  '2D': { status: 400, title: 'Invalid transaction state' },
  '3D': { status: 404, title: 'Database not found' },
  P0: { status: 400, title: 'Raised by PL/pgSQL' },
  '44': { status: 400, title: 'Check option violation' },
  '54': { status: 400, title: 'Limit exceeded' },
};

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** Socket-level failures and pg's own messages for a connection it could not make or lost. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
]);
const LOST_CONNECTION =
  /Connection terminated|timeout exceeded when trying to connect|^timeout expired$|Client has encountered a connection error/;

// Duck-typed rather than `instanceof Error`: errors made by Node's own sockets may come from
// another realm (jest's sandbox, for one).
const isErrorLike = (error: unknown): error is Error & { code?: unknown; errors?: unknown } =>
  typeof error === 'object' && error !== null && typeof (error as Error).message === 'string';

export function isPgError(error: unknown): error is PgError {
  return isErrorLike(error) && typeof error.code === 'string' && SQLSTATE.test(error.code);
}

/** The database error itself, or the one an error of ours was made from (along its causes). */
export function pgErrorOf(error: unknown): PgError | undefined {
  for (let e: unknown = error; isErrorLike(e); e = (e as { cause?: unknown }).cause)
    if (isPgError(e)) return e;
  return undefined;
}

/** The SQLSTATE of a database error, or of the one an ApiError was made from. */
export const sqlState = (error: unknown): string | undefined => pgErrorOf(error)?.code;

export function isConnectionError(error: unknown): boolean {
  // PostgreSQL's own errors are classified by SQLSTATE alone: their message can quote anything
  // (a tenant's value that reads "Connection terminated", say).
  if (!isErrorLike(error) || isPgError(error)) return false;
  if (typeof error.code === 'string' && NETWORK_CODES.has(error.code)) return true;
  if (Array.isArray(error.errors)) return error.errors.some(isConnectionError);
  return LOST_CONNECTION.test(error.message);
}

/**
 * TLS to the database failed: Node's certificate verification codes (self-signed, unknown issuer,
 * expired, wrong host name...), a failed handshake, or a server that offers no TLS at all.
 */
const TLS_CODE = /CERT|SELF_SIGNED|UNABLE_TO_|^ERR_TLS_|^ERR_SSL_|^INVALID_CA$|^HOSTNAME_MISMATCH$/;
const isTlsFailure = (error: unknown) =>
  isErrorLike(error) &&
  ((typeof error.code === 'string' && TLS_CODE.test(error.code)) ||
    error.message === 'The server does not support SSL connections');

/** pg.Pool's wait for one of its connections ran out: all were in use (not the database's fault). */
const poolExhausted = (error: unknown) =>
  isErrorLike(error) && !isPgError(error) && error.message === 'timeout exceeded when trying to connect';

/** The database's reason in plain words: its message, and its detail when it has one. */
function reason(error: PgError): string {
  return error.detail ? `${error.message} (${error.detail})` : error.message;
}

/**
 * Our own SQL gave up waiting (lock_timeout) for a lock that a transaction in the schema holds: a
 * 409 that says what to wait for. Any other error is returned as it is.
 */
export function schemaBusy(schema: string, error: unknown): unknown {
  if (!isPgError(error) || error.code !== '55P03') return error;
  return new ApiError(
    409,
    'Schema busy',
    `schema "${schema}" is locked by a transaction still open (a schema change, or LOCK TABLE) that this request has to wait for; try again once it ends`,
    { cause: error },
  );
}

/** Maps a database error to an ApiError, or returns undefined when it is not one we can explain. */
export function fromDatabaseError(error: unknown): ApiError | undefined {
  if (isTlsFailure(error)) {
    // Not the caller's doing, and not one to retry blindly: the operator must fix the CA or host.
    return new ServiceUnavailable(
      'Database unavailable',
      'no verified TLS connection to the database could be made; see the service log',
      error,
    );
  }
  if (poolExhausted(error)) return new Busy('every connection of the service is in use', error);
  if (isPgError(error) && error.code === '53300')
    return new Busy(
      /for role/.test(error.message)
        ? "the schema's role has as many connections as its CONNECTION LIMIT allows"
        : 'the database has no connection to spare',
      error,
    );
  if (isConnectionError(error)) {
    return new ServiceUnavailable(
      'Database unavailable',
      'the database does not answer; try again shortly',
      error,
    );
  }
  if (!isPgError(error)) return undefined;
  if (error.code.startsWith('28')) {
    // Our own login was refused (a key role after DBADMIN_SECRET changed, say): not the caller's doing.
    return new ApiError(
      500,
      'Service misconfigured',
      'the service could not log in to the database; see the service log',
      {
        cause: error,
      },
    );
  }
  const mapping = BY_CODE[error.code] ?? BY_CLASS[error.code.slice(0, 2)];
  if (!mapping) return undefined;
  if (mapping.status === 503) {
    return new ApiError(503, mapping.title, 'the database does not answer; try again shortly', {
      cause: error,
    });
  }
  const position = Number(error.position);
  return new ApiError(mapping.status, mapping.title, reason(error), {
    cause: error,
    details: Number.isInteger(position) && position > 0 ? { position } : {},
  });
}
