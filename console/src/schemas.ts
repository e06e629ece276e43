import { signal } from '@preact/signals';
import { api } from './api';

/** The schema names, shared by the schemas page and the header's picker. */
export const schemas = {
  names: signal<string[]>([]),
  async load(): Promise<string[]> {
    const names = await api<string[]>('GET', 'schemas');
    this.names.value = names;
    return names;
  },
};
