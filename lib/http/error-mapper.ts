import type { MiddlewareObj } from '@middy/core';
import { z } from 'zod';
import { fromDatabaseError } from '#lib/db/pg-errors';
import { ApiError, BadRequest, Busy, ConfigError } from '#lib/errors';
import { fromBrowser } from '#lib/http/cross-site';
import { type HttpEvent, header } from '#lib/http/event';
import { countBusy } from '#lib/http/metrics';
import { type HttpResponse, json } from '#lib/http/respond';
import { loggedError, logger } from '#lib/log';

/** `schemaName` -> `schema name`, as SPEC.md words its errors ("Invalid schema name"). */
function fieldLabel(field: string): string {
  if (field === 'schema') return 'schema name';
  return field.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
}

const where = (path: PropertyKey[]) => (path.length > 0 ? ` in ${path.join('.')}` : '');

function describeType(issue: z.core.$ZodIssueInvalidType, subject: string): string {
  // Zod's own wording starts "Invalid input"; a message our schemas set is used as written.
  if (!issue.message.startsWith('Invalid input')) return issue.message;
  if (issue.message.endsWith('received undefined')) return `${subject} is required`;
  const object = issue.expected === 'object' || issue.expected === 'record';
  return `${subject} must be ${object ? 'a JSON object' : `a ${issue.expected}`}`;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.map(String).join('.');
  switch (issue.code) {
    case 'invalid_type':
      return describeType(issue, field || 'request body');
    case 'invalid_key':
      return `invalid key ${JSON.stringify(String(issue.path.at(-1)))}${where(issue.path.slice(0, -1))}: ${issue.issues[0]?.message ?? issue.message}`;
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}${where(issue.path)}`;
    default: {
      const label = field ? fieldLabel(String(issue.path[0])) : '';
      return label && !issue.message.startsWith(label) ? `${field}: ${issue.message}` : issue.message;
    }
  }
}

/** A validation failure names the field and says what it must look like. */
export function fromValidationError(error: z.ZodError): BadRequest {
  const first = error.issues[0];
  const field = first && first.code !== 'unrecognized_keys' ? first.path[0] : undefined;
  const title = field === undefined ? 'Invalid request' : `Invalid ${fieldLabel(String(field))}`;
  return new BadRequest(title, error.issues.map(describeIssue).join('; '), error);
}

/** Errors thrown by Middy packages carry a status and `expose` for client errors. */
function fromMiddyError(error: unknown): ApiError | undefined {
  const { statusCode, expose, message } = error as {
    statusCode?: unknown;
    expose?: unknown;
    message?: string;
  };
  if (typeof statusCode !== 'number' || expose !== true || statusCode >= 500) return undefined;
  return new ApiError(statusCode, (error as Error).name, message ?? 'request refused');
}

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof z.ZodError) return fromValidationError(error);
  const mapped = fromDatabaseError(error) ?? fromMiddyError(error);
  if (mapped) return mapped;
  return new ApiError(
    500,
    'Internal error',
    'the request failed unexpectedly; the service log has the details',
    {
      cause: error,
    },
  );
}

function log(apiError: ApiError): void {
  if (apiError instanceof Busy) countBusy();
  if (apiError.status === 503) {
    logger.warn(apiError.title, {
      reason: (apiError.cause as Error | undefined)?.message ?? apiError.message,
    });
  } else if (apiError instanceof ConfigError) {
    logger.error(apiError.message);
  } else if (apiError.status >= 500) {
    // The stack goes to the log only, never into the response.
    logger.error('request failed', { error: loggedError(apiError.cause ?? apiError) });
  }
}

/** A message can quote what the caller sent (PostgreSQL's can be megabytes): answers carry 2000 characters. */
const MAX_MESSAGE = 2000;
const shorten = (message: string) =>
  message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}… (${message.length} characters)` : message;

/**
 * Outermost middleware: every failure becomes `{error, message}` with a status. 5xx bodies never
 * carry stacks or SQL.
 */
export const errorMapper = (): MiddlewareObj<HttpEvent, HttpResponse> => ({
  onError: (request) => {
    const apiError = toApiError(request.error);
    log(apiError);
    request.response = json(
      apiError.status,
      { error: apiError.title, message: shorten(apiError.message), ...apiError.details },
      fromConsole(request.event) || (request.event && fromBrowser(request.event))
        ? withoutChallenge(apiError.headers)
        : apiError.headers,
    );
  },
});

/**
 * A 401 asks for Basic credentials (SPEC.md) only when an API client asked: never the web console
 * (it marks its requests, and has a sign-in form of its own), never a browser (lib/http/cross-site
 * fromBrowser). A browser that is never asked never prompts, so it never keeps the admin's
 * credentials to send along with other sites' requests.
 */
export const CONSOLE_HEADER = 'x-requested-with';
const fromConsole = (event: HttpEvent | undefined) =>
  !!event && header(event, CONSOLE_HEADER) === 'dbadmin-console';

const withoutChallenge = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'www-authenticate'));
