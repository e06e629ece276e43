import { signal } from '@preact/signals';

/**
 * Hash routes, so the page works under any path prefix (an API Gateway stage):
 *   #/license  #/schemas  #/s/SCHEMA  #/s/SCHEMA/t/TABLE[/structure]  #/s/SCHEMA/sql  #/s/SCHEMA/keys
 */
export type Route =
  | { page: 'license' }
  | { page: 'schemas' }
  | { page: 'tables'; schema: string }
  | { page: 'table'; schema: string; table: string; tab: 'data' | 'structure' }
  | { page: 'sql'; schema: string }
  | { page: 'keys'; schema: string };

export function parseRoute(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((part) => decodeURIComponent(part));
  const [first, schema, kind, table, tab] = parts;
  if (first === 'license') return { page: 'license' };
  if (first === 's' && schema) {
    if (kind === 't' && table)
      return { page: 'table', schema, table, tab: tab === 'structure' ? 'structure' : 'data' };
    if (kind === 'sql') return { page: 'sql', schema };
    if (kind === 'keys') return { page: 'keys', schema };
    return { page: 'tables', schema };
  }
  return { page: 'schemas' };
}

export function href(route: Route): string {
  const e = encodeURIComponent;
  switch (route.page) {
    case 'license':
    case 'schemas':
      return `#/${route.page}`;
    case 'tables':
      return `#/s/${e(route.schema)}`;
    case 'table':
      return `#/s/${e(route.schema)}/t/${e(route.table)}${route.tab === 'structure' ? '/structure' : ''}`;
    case 'sql':
    case 'keys':
      return `#/s/${e(route.schema)}/${route.page}`;
  }
}

export const route = signal<Route>(parseRoute(location.hash));
window.addEventListener('hashchange', () => {
  route.value = parseRoute(location.hash);
});

export const go = (to: Route) => {
  location.hash = href(to);
};

/** The schema the pages work in: the route's, else the last one opened. */
export const currentSchema = (r: Route): string | undefined => ('schema' in r ? r.schema : undefined);
