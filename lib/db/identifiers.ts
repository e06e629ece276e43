import pg from 'pg';
import { BadRequest } from '#lib/errors';

/** The only shape of name dbadmin lets into SQL: PostgreSQL's own length limit, no quoting tricks. */
export const IDENTIFIER_PATTERN = /^[A-Za-z][A-Za-z0-9_]*$/;
export const IDENTIFIER_MAX_LENGTH = 63;

export function isIdentifier(name: string): boolean {
  return name.length <= IDENTIFIER_MAX_LENGTH && IDENTIFIER_PATTERN.test(name);
}

export const identifierRule = (label: string, maxLength = IDENTIFIER_MAX_LENGTH) =>
  `${label} must start with a letter and contain only letters, numbers, underscores (at most ${maxLength} characters)`;

/**
 * Quotes a validated identifier. Every name that reaches SQL text passes through here; a name
 * that fails validation never reaches the database.
 */
export function quoteIdent(name: string, label = 'identifier'): string {
  if (!isIdentifier(name)) throw new BadRequest(`Invalid ${label}`, identifierRule(label));
  return pg.escapeIdentifier(name);
}

/** For the few statements that cannot take bind parameters (CREATE ROLE ... PASSWORD). */
export function quoteLiteral(value: string): string {
  return pg.escapeLiteral(value);
}

/**
 * Quotes a name read from the catalog (never from a caller), which may be any PostgreSQL name:
 * e.g. a sequence PostgreSQL named after a table.
 */
export function quoteCatalogName(name: string): string {
  return pg.escapeIdentifier(name);
}

/** `"schema"."table"`, each name checked and quoted. */
export const qualified = (schema: string, table: string) =>
  `${quoteIdent(schema, 'schema name')}.${quoteIdent(table, 'table name')}`;
