/**
 * Foreign keys as the grid's picker uses them: which cells pick a row of another table, and which
 * of that table's columns the picker shows. Pure functions over GET /api/schema's answer.
 */
import type { ForeignKey, TableStructure } from '../values';

export interface Reference {
  foreignKey: ForeignKey;
  /** The referenced table, as GET /api/schema answers it for this schema. */
  table: TableStructure;
}

/**
 * The table a column's value names, when one cell's value is the whole key: a key of several
 * columns, or one that references a table outside this schema, is edited as text.
 */
export function referenceOf(
  structure: TableStructure | undefined,
  tables: TableStructure[],
  column: string,
  schema?: string,
): Reference | undefined {
  const foreignKey = structure?.foreignKeys.find((fk) => fk.column === column);
  if (!structure || !foreignKey) return undefined;
  // A table of the same name in another schema is not the one `tables` holds.
  if (
    schema !== undefined &&
    foreignKey.referencedSchema !== undefined &&
    foreignKey.referencedSchema !== schema
  )
    return undefined;
  const columns = structure.foreignKeys.filter((fk) => fk.constraintName === foreignKey.constraintName);
  if (columns.length > 1) return undefined;
  const table = tables.find((t) => t.table === foreignKey.referencedTable);
  return table && { foreignKey, table };
}

const TEXT_TYPES = new Set(['text', 'character varying', 'character', 'citext']);

/** The columns a picked row shows (`select=`): the referenced column, then up to `most` text columns. */
export function pickerColumns({ foreignKey, table }: Reference, most = 3): string[] {
  const text = table.columns
    .filter((c) => TEXT_TYPES.has(c.type) && c.name !== foreignKey.referencedColumn)
    .map((c) => c.name);
  return [foreignKey.referencedColumn, ...text.slice(0, most)];
}
