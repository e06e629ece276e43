import { api } from './api';
import type { TableStructure } from './values';

/**
 * A schema's structure (GET /api/schema), as the pages that need it load it.
 */

export async function loadStructure(schema: string): Promise<TableStructure[]> {
  return (await api<{ schema: TableStructure[] }>('GET', 'schema', { query: { schema } })).schema;
}
