/**
 * The one error family of dbadmin. lib/ throws these; lib/http/error-mapper turns them into
 * `{error, message}` responses. `error` is a short title, `message` tells the caller what to fix.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    options?: { cause?: unknown; headers?: Record<string, string>; details?: Record<string, unknown> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.headers = options?.headers ?? {};
    this.details = options?.details ?? {};
  }

  readonly headers: Record<string, string>;
  /** Extra fields for the error body, e.g. the character position of a SQL error. */
  readonly details: Record<string, unknown>;
}

export class BadRequest extends ApiError {
  constructor(title: string, message: string, cause?: unknown) {
    super(400, title, message, { cause });
  }
}

export class Unauthorized extends ApiError {
  constructor(message: string) {
    super(401, 'Unauthorized', message, {
      headers: { 'WWW-Authenticate': 'Basic realm="dbadmin"' },
    });
  }
}

export class Forbidden extends ApiError {
  constructor(message: string) {
    super(403, 'Forbidden', message);
  }
}

export class NotFound extends ApiError {
  constructor(title: string, message: string) {
    super(404, title, message);
  }
}

export class MethodNotAllowed extends ApiError {
  constructor(method: string, path: string, allowed: readonly string[]) {
    super(405, 'Method not allowed', `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
      headers: { Allow: allowed.join(', ') },
    });
  }
}

export class PayloadTooLarge extends ApiError {
  /** `hint`: what to do instead, after the limit. */
  constructor(limitBytes: number, hint = '') {
    super(413, 'Payload too large', `request body must be at most ${limitBytes} bytes${hint}`);
  }
}

export class UnsupportedMediaType extends ApiError {
  /** `accepted`: what to send instead. */
  constructor(
    contentType: string,
    accepted = 'Content-Type: application/json (and the body, if any, as JSON)',
  ) {
    super(415, 'Unsupported media type', `send ${accepted}, not ${contentType}`);
  }
}

export class ServiceUnavailable extends ApiError {
  constructor(title: string, message: string, cause?: unknown) {
    super(503, title, message, { cause });
  }
}

/**
 * Every connection this process may hold is in use and none came free in time: the service is
 * busy, the database is fine. The caller should retry after `Retry-After` seconds.
 */
export class Busy extends ApiError {
  constructor(message: string, cause?: unknown) {
    super(503, 'Service busy', `${message}; retry in a moment`, { cause, headers: { 'Retry-After': '1' } });
  }
}

/** A statement (or the whole request) ran out of time; the statement was cancelled in PostgreSQL. */
export class QueryTimeout extends ApiError {
  constructor(reason: string, cause?: unknown) {
    super(400, 'Query timeout', `the statement ${reason} and was cancelled in PostgreSQL`, { cause });
  }
}

/** A setting is missing or malformed: the service cannot start. */
export class ConfigError extends ApiError {
  constructor(message: string) {
    super(500, 'Service misconfigured', message);
  }
}
