import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The layers of lib/ import one way (http -> admin and license -> db): no module imports itself
 * back through others, type imports included, so each can be read and changed from the bottom up.
 */

const ROOT = join(__dirname, '..', '..');

function modulesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modulesUnder(path);
    return entry.name.endsWith('.ts') ? [path.replace(/\.ts$/, '')] : [];
  });
}

/** `lib/http/handler` -> the lib modules it names in an import or export, by path. */
function importsOf(module: string): string[] {
  const source = readFileSync(join(ROOT, `${module}.ts`), 'utf8');
  return [...source.matchAll(/from '#(lib\/[^']+)'/g)].map((match) => match[1] as string);
}

/** Every cycle, each as the modules around it from its first, once. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found = new Map<string, string[]>();
  const walk = (module: string, path: string[]) => {
    const at = path.indexOf(module);
    if (at >= 0) {
      const cycle = path.slice(at);
      found.set([...cycle].sort().join(' '), cycle);
      return;
    }
    for (const next of graph.get(module) ?? []) walk(next, [...path, module]);
  };
  for (const module of graph.keys()) walk(module, []);
  return [...found.values()];
}

describe('module layout', () => {
  const modules = modulesUnder('lib');
  const graph = new Map(modules.map((module) => [module, importsOf(module)]));

  it('reads every module of lib/ and what it imports', () => {
    expect(modules.length).toBeGreaterThan(50);
    expect(graph.get('lib/http/handler')).toContain('lib/http/authenticate');
  });

  it('names only modules that exist', () => {
    const missing = [...graph].flatMap(([module, imports]) =>
      imports.filter((target) => !graph.has(target)).map((target) => `${module} -> ${target}`),
    );
    expect(missing).toEqual([]);
  });

  it('has no import cycle in lib/', () => {
    expect(cycles(graph).map((cycle) => cycle.map((m) => relative('lib', m)).join(' -> '))).toEqual([]);
  });

  it('would see one (the check itself)', () => {
    const planted = new Map(graph);
    planted.set('lib/http/auth-context', [
      ...(graph.get('lib/http/auth-context') ?? []),
      'lib/http/authenticate',
    ]);
    expect(cycles(planted).length).toBeGreaterThan(0);
  });
});
