import type pg from 'pg';
import { type ColumnInfo, schemaNotFound, type TableInfo, tableNotFound } from '#lib/db/catalog';

/** A table as a page read needs it: what tableInfo says, and how many rows the statistics think it has. */
export interface TableEstimate extends TableInfo {
  /**
   * The planner's statistics' row count (pg_class.reltuples, kept by ANALYZE and autovacuum), over
   * the table and every partition or inheritance child a SELECT on it reads. A relation never
   * analysed counts its live rows in the cumulative statistics instead, which may lag a moment or
   * be 0 after a statistics reset: too low, never too high, so a caller that counts when this is
   * small must count with a bound.
   */
  estimatedRows: number;
}

/**
 * tableInfo's question (lib/db/catalog) and the row estimate in one round trip, on the service's
 * pool: catalog and statistics reads only, which take no lock on the table (pg_relation_size would:
 * a tenant holding its table locked could then stall the service's pool) and run no tenant code.
 */
const TABLE_ESTIMATE = `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT coalesce(json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod))
                                   ORDER BY a.attnum), '[]')
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         (SELECT coalesce(array_agg(a.attname::text ORDER BY k.ord), '{}')
            FROM pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
           WHERE i.indrelid = c.oid AND i.indisprimary) AS primary_key,
         (WITH RECURSIVE tree(relid) AS (
            SELECT c.oid
             UNION
            SELECT h.inhrelid FROM pg_inherits h JOIN tree ON h.inhparent = tree.relid)
          SELECT coalesce(sum(CASE WHEN r.reltuples >= 0 THEN r.reltuples::float8
                                   ELSE pg_stat_get_live_tuples(r.oid)::float8 END), 0)
            FROM tree JOIN pg_class r ON r.oid = tree.relid
           WHERE r.relkind <> 'p') AS estimated_rows
    FROM pg_namespace n
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p')
   WHERE n.nspname = $1`;

export async function tableEstimate(db: pg.Pool, schema: string, table: string): Promise<TableEstimate> {
  const { rows } = await db.query<{
    table_exists: boolean;
    columns: ColumnInfo[];
    primary_key: string[];
    estimated_rows: number;
  }>({ name: 'dbadmin.table-estimate', text: TABLE_ESTIMATE, values: [schema, table] });
  const row = rows[0];
  if (!row) throw schemaNotFound(schema);
  if (!row.table_exists) throw tableNotFound(schema, table);
  return {
    schema,
    table,
    columns: row.columns,
    primaryKey: row.primary_key,
    estimatedRows: Math.round(row.estimated_rows),
  };
}
