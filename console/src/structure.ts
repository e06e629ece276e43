import { api } from './api';
import type { TableStructure } from './values';

export async function loadStructure(schema: string): Promise<TableStructure[]> {
  return (await api<{ schema: TableStructure[] }>('GET', 'schema', { query: { schema } })).schema;
}
