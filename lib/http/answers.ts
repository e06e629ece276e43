import { LAMBDA_RESPONSE_LIMIT } from '#lib/http/response-limit';

/**
 * An error status a route's own work can answer, and why: routes list theirs (`errors`), and
 * lib/http/openapi adds those of the chain (authentication, license gate, body, key scope).
 */
export interface Answer {
  status: 400 | 401 | 403 | 404 | 409 | 413 | 429 | 502 | 503 | 507;
  why: string;
}

export const NO_SCHEMA: Answer = { status: 404, why: 'the schema does not exist' };
export const NO_TABLE: Answer = { status: 404, why: 'the table does not exist' };

/** Any work on a connection of the schema's role (lib/db/executor). */
export const SCHEMA_SESSION: readonly Answer[] = [
  { status: 403, why: 'PostgreSQL refused a privilege, or a write in an anon key’s read-only transaction' },
  NO_SCHEMA,
  { status: 409, why: 'a lock or deadlock with other sessions of the schema; try again' },
];

/** Revocations end the schema's sessions, then retry a few times (lib/db/schema-roles revoking). */
export const ROLES_BUSY: Answer = {
  status: 409,
  why: 'the schema’s roles stayed busy (its sessions kept taking locks); try again',
};

/** Our own SQL gave up waiting for a lock a transaction in the schema holds (lib/db/pg-errors schemaBusy). */
export const SCHEMA_BUSY: Answer = {
  status: 409,
  why: 'a transaction still open in the schema (a schema change, LOCK TABLE) holds a lock this needs; try again once it ends',
};

/** A change to every row a filter finds, past the caller's maxAffected (lib/admin/matching-rows). */
export const MAX_AFFECTED: Answer = {
  status: 409,
  why: 'more rows would change than maxAffected allows; nothing was changed, and the message says how many',
};

/** Rows counted while they arrive (lib/db/result-limits). */
export const RESULT_LIMITS: Answer = {
  status: 413,
  why: 'the result is over QUERY_MAX_ROWS rows or QUERY_MAX_BYTES bytes, or holds a value nested too deeply for JSON',
};

/** Statements that run code a tenant may have planted (triggers, defaults), which can talk back. */
export const WIRE_LIMIT: Answer = {
  status: 413,
  why: 'what PostgreSQL sent back (a row, notices of code planted in the schema) is over 2 × QUERY_MAX_BYTES + 1 MiB',
};

/** Answers that grow with the data (lib/http/response-limit). */
export const RESPONSE_LIMIT: Answer = {
  status: 413,
  why: `the answer would be over the ${LAMBDA_RESPONSE_LIMIT} bytes a Lambda response may carry`,
};

/** Public routes that read PostgreSQL; authenticated ones always may (keys, the license). */
export const DATABASE: Answer = { status: 503, why: 'the database does not answer; try again shortly' };
