import { to as copyTo } from 'pg-copy-streams';
import { orderBy, qualified } from '#lib/admin/tables';
import { tableInfo } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { boundedQuery, type ResultLimits, ResultTooLarge } from '#lib/db/result-limits';
import { Download } from '#lib/download';
import { NotFound } from '#lib/errors';

export interface ExportInput {
  schema: string;
  table: string;
  format: 'json' | 'csv';
  limit: number;
}

const noData = (table: string) => new NotFound('No data to export', `table "${table}" has no rows`);

/**
 * CSV comes from PostgreSQL's own COPY (RFC 4180 quoting, header line); JSON is the same rows as
 * the table read returns, in primary-key order. Both are read as the schema's role and capped by
 * the result limits (a CSV past QUERY_MAX_BYTES stops streaming and is cancelled).
 */
export async function exportTable(
  access: SchemaAccess,
  limits: ResultLimits,
  { schema, table, format, limit }: ExportInput,
) {
  const info = await tableInfo(access.catalog, schema, table);
  const select = `SELECT * FROM ${qualified(schema, table)} ORDER BY ${orderBy(info)} LIMIT ${Math.trunc(limit)}`;
  if (format === 'json') {
    const [result] = await access.run((client) =>
      boundedQuery(client, { text: select }, limits, () => access.cancel(client)),
    );
    const rows = result?.rows ?? [];
    if (rows.length === 0) throw noData(table);
    return { table, count: rows.length, data: rows };
  }
  const csv = await access.run(async (client) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let exceeded = false;
    // Past the limit the rest is cancelled in PostgreSQL and drained, never kept. (One huge row,
    // which pg-copy-streams only hands over whole, is cut off by the session's wire limit.)
    const exceed = () => {
      exceeded = true;
      access.cancel(client);
    };
    const copied = (async () => {
      for await (const chunk of client.query(
        copyTo(`COPY (${select}) TO STDOUT WITH (FORMAT csv, HEADER true)`),
      )) {
        if (exceeded) continue;
        bytes += (chunk as Buffer).length;
        if (bytes > limits.maxBytes) exceed();
        else chunks.push(chunk as Buffer);
      }
    })();
    await copied.catch((error: unknown) => {
      if (!exceeded) throw error;
    });
    if (exceeded) throw new ResultTooLarge('QUERY_MAX_BYTES', limits.maxBytes);
    return Buffer.concat(chunks).toString('utf8');
  });
  // A header line alone means no rows.
  if (csv.indexOf('\n') === csv.length - 1) throw noData(table);
  return new Download(csv, 'text/csv; charset=utf-8', `${table}.csv`);
}
