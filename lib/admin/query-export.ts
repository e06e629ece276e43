import type pg from 'pg';
import { splitScript } from '#lib/admin/query-statements';
import type { SchemaAccess } from '#lib/db/executor';
import { beginText } from '#lib/db/pooler';
import type { ResultLimits } from '#lib/db/result-limits';
import { readText } from '#lib/db/text-result';
import { Download } from '#lib/download';
import { BadRequest } from '#lib/errors';
import { JsonText } from '#lib/json-text';

/**
 * A query's rows as a file (POST /api/query/export): the SQL editor's "export them" for a result
 * whose rows were not all shown. One SELECT, rendered by PostgreSQL itself (COPY ... TO STDOUT for
 * CSV, row_to_json for JSON) as the schema's role, in a READ ONLY transaction that is always
 * rolled back: an export changes nothing, whatever the query calls. A page is QUERY_MAX_ROWS rows
 * at most (and QUERY_MAX_BYTES); a full one names the offset the next starts at.
 */

export interface QueryExportInput {
  sql: string;
  format: 'csv' | 'json';
  /** Rows to skip, for the pages after the first. */
  offset: number;
  /** CSV: the header line. */
  header: boolean;
  timeoutMs: number;
}

/** The one query the SQL holds, or a 400 saying what an export takes. */
async function theQuery(sql: string): Promise<string> {
  const statements = await splitScript(sql);
  if (!statements) {
    throw new BadRequest(
      'Invalid SQL',
      'the SQL could not be read: run it in the editor to see where it fails',
    );
  }
  const [only, ...more] = statements;
  if (!only || more.length > 0 || !only.query) {
    throw new BadRequest(
      'Not one query',
      `an export takes one SELECT (or VALUES, or TABLE) and writes its rows to a file; this SQL is ${
        more.length > 0 ? `${statements.length} statements` : 'not a query'
      }`,
    );
  }
  return only.text;
}

/**
 * The statement that renders the rows. The query is one whole statement as PostgreSQL's parser
 * split it, so its quotes, comments and parentheses are closed; the line breaks around it end a
 * trailing `--` comment before our closing parenthesis.
 */
function rendering(query: string, input: QueryExportInput, limits: ResultLimits): string {
  const rows = `SELECT * FROM (\n${query}\n) AS q OFFSET ${Math.trunc(input.offset)} LIMIT ${limits.maxRows}`;
  return input.format === 'csv'
    ? `COPY (${rows}) TO STDOUT WITH (FORMAT csv, HEADER ${input.header})`
    : `SELECT pg_catalog.row_to_json(r.*) FROM (${rows}) AS r`;
}

/** `work` read-only and rolled back: in our own transaction, or in an anon key's, which is so already. */
async function readOnly<T>(
  client: pg.ClientBase,
  access: SchemaAccess,
  timeoutMs: number,
  work: () => Promise<T>,
) {
  if (!access.readOnly) await client.query(beginText(client, 'BEGIN READ ONLY'));
  try {
    await client.query(`SET LOCAL statement_timeout = ${Math.trunc(timeoutMs)}`);
    return await work();
  } finally {
    // Never committed: before PostgreSQL 17 a READ ONLY transaction may still create large objects.
    if (!access.readOnly) await client.query('ROLLBACK').catch(() => undefined);
  }
}

export async function exportQuery(access: SchemaAccess, limits: ResultLimits, input: QueryExportInput) {
  const sql = rendering(await theQuery(input.sql), input, limits);
  // Sent with the simple protocol (COPY's output needs it): one statement, checked again whole.
  if ((await splitScript(sql))?.length !== 1) {
    throw new BadRequest('Not one query', 'an export takes one SELECT (or VALUES, or TABLE)');
  }
  const csv = input.format === 'csv';
  const { text, records } = await access.run((client) =>
    readOnly(client, access, input.timeoutMs, () =>
      readText(client, sql, limits, () => access.cancel(client)),
    ),
  );
  const count = Math.max(0, csv && input.header ? records - 1 : records);
  // A full page: more rows may follow, from the next offset.
  const nextOffset = count === limits.maxRows ? input.offset + count : undefined;
  if (csv) {
    const headers: Record<string, string> = { 'x-row-count': String(count) };
    if (nextOffset !== undefined) headers['x-next-offset'] = String(nextOffset);
    return new Download(text, 'text/csv; charset=utf-8', 'query.csv', headers);
  }
  const next = nextOffset === undefined ? '' : `"nextOffset":${nextOffset},`;
  return new JsonText(`{"count":${count},${next}"data":[${text}]}`);
}
