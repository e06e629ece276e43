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

/**
 * A cycle for each import that leads back to a module still being walked (a depth-first walk
 * that visits each module once), as the modules around it.
 */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const walk = (module: string) => {
    path.push(module);
    for (const next of graph.get(module) ?? []) {
      const at = path.indexOf(next);
      if (at >= 0) found.push(path.slice(at));
      else if (!done.has(next)) walk(next);
    }
    path.pop();
    done.add(module);
  };
  for (const module of graph.keys()) if (!done.has(module)) walk(module);
  return found;
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
