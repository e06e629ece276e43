import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiRoutes, routes as metaRoutes } from '#functions/meta';
import {
  granted,
  narrowed,
  PERMISSIONS,
  PERSON_ROLES,
  type Permission,
  ROLE_PERMISSIONS,
  rolesTable,
  within,
} from '#lib/access';
import { openApiDocument } from '#lib/http/openapi';
import { permissionOf } from '#lib/http/route';

/** The roles' one definition: what the README shows, what every route needs, how tokens narrow. */

describe('roles', () => {
  it('go from most to least: each holds every permission of those after it', () => {
    for (let i = 1; i < PERSON_ROLES.length; i++) {
      const [above, below] = [PERSON_ROLES[i - 1], PERSON_ROLES[i]] as const;
      expect(
        ROLE_PERMISSIONS[below as (typeof PERSON_ROLES)[number]].filter(
          (p) => !ROLE_PERMISSIONS[above as (typeof PERSON_ROLES)[number]].includes(p),
        ),
      ).toEqual([]);
    }
  });

  it('are the permissions the console knows by name (console/src/api.ts Permission)', () => {
    const source = readFileSync(join(__dirname, '..', '..', 'console', 'src', 'api.ts'), 'utf8');
    const union = /export type Permission =([^;]+);/.exec(source)?.[1] ?? '';
    const named = [...union.matchAll(/'([a-z.]+)'/g)].map((m) => m[1]);
    expect(named.sort()).toEqual(Object.keys(PERMISSIONS).sort());
  });

  it('keep whole-database permissions from anyone scoped to some schemas', () => {
    const scopedOwner = { role: 'owner' as const, schemas: ['shop'] };
    expect(granted(scopedOwner, 'read')).toBe(true);
    expect(granted(scopedOwner, 'keys.manage')).toBe(true);
    for (const p of ['schemas.create', 'sql.admin', 'metrics', 'people', 'license'] as Permission[])
      expect(granted(scopedOwner, p)).toBe(false);
  });

  it('narrow a token to the lower role and the common schemas', () => {
    expect(narrowed({ role: 'admin', schemas: null }, { role: 'analyst', schemas: ['a', 'b'] })).toEqual({
      role: 'analyst',
      schemas: ['a', 'b'],
    });
    expect(
      narrowed({ role: 'analyst', schemas: ['a', 'c'] }, { role: 'owner', schemas: ['a', 'b'] }),
    ).toEqual({
      role: 'analyst',
      schemas: ['a'],
    });
    expect(within({ role: 'developer', schemas: ['a'] }, { role: 'developer', schemas: ['a', 'b'] })).toBe(
      true,
    );
    expect(within({ role: 'admin', schemas: ['a'] }, { role: 'developer', schemas: null })).toBe(false);
    expect(within({ role: 'analyst', schemas: null }, { role: 'owner', schemas: ['a'] })).toBe(false);
  });

  it('are the README’s table, generated from this definition (npm run docs:roles writes it)', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    expect(readme).toContain(rolesTable());
    expect(rolesTable().split('\n')).toHaveLength(Object.keys(PERMISSIONS).length + 2);
  });
});

describe('every route', () => {
  const routes = [...apiRoutes, ...metaRoutes];

  it('that only the admin and people may call says which permission it needs', () => {
    const unsaid = routes
      .filter((r) => r.access === 'admin' && !r.permission)
      .map((r) => `${r.method} ${r.path}`);
    expect(unsaid).toEqual([]);
  });

  it('that changes structure needs alter, not write', () => {
    const structural = routes.filter(
      (r) =>
        r.access === 'write' &&
        /^\/api\/(table\/create|table\/\{tableName\}(\/(clone|column.*|constraints.*|indexes.*))?|types.*)$/.test(
          r.path,
        ) &&
        !(r.method === 'GET'),
    );
    expect(structural.length).toBeGreaterThan(10);
    expect(structural.filter((r) => permissionOf(r) !== 'alter').map((r) => `${r.method} ${r.path}`)).toEqual(
      [],
    );
  });

  it('states its permission in the OpenAPI document', () => {
    const document = openApiDocument(routes, { title: 't', version: '1' });
    const insert = document.paths['/api/table/{tableName}/row']?.post as Record<string, unknown>;
    const drop = document.paths['/api/schema/{schemaName}']?.delete as Record<string, unknown>;
    expect(insert['x-dbadmin-permission']).toBe('write');
    expect(drop['x-dbadmin-permission']).toBe('schemas.delete');
    expect(String(drop.description)).toMatch(/owner, admin\b/);
  });
});
