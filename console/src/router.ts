import { signal } from '@preact/signals';

/**
 * Hash routes, so the page works under any path prefix (an API Gateway stage):
 *   #/license  #/schemas  #/tenants[/SCHEMA]  #/audit[/SCHEMA]  #/s/SCHEMA  #/s/SCHEMA/t/TABLE[/structure|/indexes]
 *   #/s/SCHEMA/sql  #/s/SCHEMA/keys  #/migrations[/ID]  #/people  #/account  #/welcome/INVITATION
 * A table's data tab keeps how it is viewed (filters, sort, search, page) in the hash's query:
 *   #/s/SCHEMA/t/TABLE?filter=age.gte.18&order=name.desc (console/src/grid/view.ts reads it).
 */
export type TableTab = 'data' | 'structure' | 'indexes';

export type Route =
  | { page: 'license' }
  | { page: 'schemas' }
  | { page: 'tenants'; schema?: string }
  | { page: 'audit'; schema?: string }
  /** The migrations across tenant schemas (with the form for a new one), or one of them by id. */
  | { page: 'migrations'; id?: string }
  | { page: 'tables'; schema: string }
  | { page: 'table'; schema: string; table: string; tab: TableTab; view?: string }
  | { page: 'sql'; schema: string }
  | { page: 'keys'; schema: string }
  | { page: 'people' }
  | { page: 'account' }
  /** An invitation's link: the page that sets the password, before anyone is signed in. */
  | { page: 'welcome'; token: string };

function tableRoute(schema: string, table: string, tab: string | undefined, view: string): Route {
  if (tab === 'structure' || tab === 'indexes') return { page: 'table', schema, table, tab };
  return { page: 'table', schema, table, tab: 'data', ...(view ? { view } : {}) };
}

/** A path segment as written; a malformed escape (a link cut short: `100%`) is kept as it is. */
function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

export function parseRoute(hash: string): Route {
  const [path = '', view = ''] = hash.replace(/^#\/?/, '').split(/\?(.*)/s);
  const parts = path.split('/').filter(Boolean).map(decodePart);
  const [first, schema, kind, table, tab] = parts;
  if (first === 'license' || first === 'people' || first === 'account') return { page: first };
  if (first === 'welcome' && schema) return { page: 'welcome', token: schema };
  if (first === 'tenants' || first === 'audit') return schema ? { page: first, schema } : { page: first };
  if (first === 'migrations') return schema ? { page: first, id: schema } : { page: first };
  if (first === 's' && schema) return schemaRoute(schema, kind, table, tab, view);
  return { page: 'schemas' };
}

/** `#/s/SCHEMA/...`: its tables, a table, its SQL, its keys. */
function schemaRoute(schema: string, kind?: string, table?: string, tab?: string, view = ''): Route {
  if (kind === 't' && table) return tableRoute(schema, table, tab, view);
  if (kind === 'sql') return { page: 'sql', schema };
  if (kind === 'keys') return { page: 'keys', schema };
  return { page: 'tables', schema };
}

export function href(route: Route): string {
  const e = encodeURIComponent;
  switch (route.page) {
    case 'license':
    case 'schemas':
    case 'people':
    case 'account':
      return `#/${route.page}`;
    case 'welcome':
      return `#/welcome/${e(route.token)}`;
    case 'tenants':
    case 'audit':
      return route.schema ? `#/${route.page}/${e(route.schema)}` : `#/${route.page}`;
    case 'migrations':
      return route.id ? `#/migrations/${e(route.id)}` : '#/migrations';
    case 'tables':
      return `#/s/${e(route.schema)}`;
    case 'table':
      if (route.tab !== 'data') return `#/s/${e(route.schema)}/t/${e(route.table)}/${route.tab}`;
      return `#/s/${e(route.schema)}/t/${e(route.table)}${route.view ? `?${route.view}` : ''}`;
    case 'sql':
    case 'keys':
      return `#/s/${e(route.schema)}/${route.page}`;
  }
}

export const route = signal<Route>(parseRoute(location.hash));
window.addEventListener('hashchange', () => {
  route.value = parseRoute(location.hash);
});

/** `replace`: no new history entry (a search box's keystrokes are one step back, not many). */
export const go = (to: Route, { replace = false } = {}) => {
  if (!replace) {
    location.hash = href(to);
    return;
  }
  history.replaceState(history.state, '', href(to));
  route.value = parseRoute(location.hash);
};

/** The schema the pages work in: the route's, else the last one opened. */
export const currentSchema = (r: Route): string | undefined => ('schema' in r ? r.schema : undefined);
