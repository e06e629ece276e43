import { type TableInfo, tableInfoQuery, toTableInfo } from '#lib/db/catalog';
import type { CatalogRead } from '#lib/db/catalog-read';

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
const TABLE_ESTIMATE = tableInfoQuery(`,
         (WITH RECURSIVE tree(relid) AS (
            SELECT c.oid
             UNION
            SELECT h.inhrelid FROM pg_inherits h JOIN tree ON h.inhparent = tree.relid)
          SELECT coalesce(sum(CASE WHEN r.reltuples >= 0 THEN r.reltuples::float8
                                   ELSE pg_stat_get_live_tuples(r.oid)::float8 END), 0)
            FROM tree JOIN pg_class r ON r.oid = tree.relid
           WHERE r.relkind <> 'p') AS estimated_rows`);

export const tableEstimateRead = (schema: string, table: string): CatalogRead<TableEstimate> => ({
  name: 'dbadmin.table-estimate',
  text: TABLE_ESTIMATE,
  values: [schema, table],
  schema,
  decode: (row) => ({
    ...toTableInfo(row, schema, table, 'readable'),
    estimatedRows: Math.round(Number(row?.estimated_rows ?? 0)),
  }),
});
