import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { orderBy, qualified } from '#lib/admin/tables';
import { tableInfo } from '#lib/db/catalog';
import { withClient } from '#lib/db/pool';
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
 * the table read returns, in primary-key order.
 */
export async function exportTable(db: pg.Pool, { schema, table, format, limit }: ExportInput) {
  const info = await tableInfo(db, schema, table);
  const select = `SELECT * FROM ${qualified(schema, table)} ORDER BY ${orderBy(info)} LIMIT ${Math.trunc(limit)}`;
  if (format === 'json') {
    const { rows } = await db.query(select);
    if (rows.length === 0) throw noData(table);
    return { table, count: rows.length, data: rows };
  }
  const csv = await withClient(db, async (client) => {
    const chunks: Buffer[] = [];
    for await (const chunk of client.query(
      copyTo(`COPY (${select}) TO STDOUT WITH (FORMAT csv, HEADER true)`),
    )) {
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  });
  // A header line alone means no rows.
  if (csv.indexOf('\n') === csv.length - 1) throw noData(table);
  return new Download(csv, 'text/csv; charset=utf-8', `${table}.csv`);
}
