import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, type Diagnostics } from 'recheck';
import ts from 'typescript';

/**
 * No regular expression the service or the license server runs can be made to backtrack: each
 * regex literal in lib/, functions/ and license-server/ (found by the TypeScript parser, so a new
 * one is checked the day it is written) is proved linear by recheck, a ReDoS checker built on
 * automata theory (issue 35: `/^_+|_+$/` over a header of underscores held the process for 10 s).
 * A regex built at run time (`new RegExp(text)`, or text handed to match/matchAll/search) is
 * refused unless DYNAMIC below says which patterns it can build, and those are checked instead. A
 * super-linear one is allowed only in NEVER_CALLER_INPUT, with the reason no caller's text reaches it.
 */

const ROOT = join(__dirname, '..', '..');
const SOURCES = ['lib', 'functions', 'license-server'];

// The checker's pure JavaScript build, inside the package: the same verdict on every machine,
// with no native binary or JVM, which the package also offers, picked up on some and not others.
process.env.RECHECK_BACKEND = 'pure';

/**
 * Counts instead of clocks, and a fixed seed for the fuzzer, so a loaded machine changes no
 * verdict. The recall step, which replays an attack once one is found, keeps its default time
 * limit: the pure build refuses to run it without one.
 */
const CHECK = {
  randomSeed: 35,
  timeout: null,
  attackTimeout: null,
  incubationTimeout: null,
  seedingTimeout: null,
} as const;

/** Super-linear, and why no caller's text ever reaches them: file -> the pattern's source. */
const NEVER_CALLER_INPUT: Record<string, { source: string; why: string }[]> = {
  'lib/http/handler.ts': [
    { source: '\\{[^/]+\\}', why: 'rewrites the route templates of our own route tables, never a request' },
  ],
};

interface Pattern {
  /** `file:line`, or the construction and its input for a built one. */
  where: string;
  source: string;
  flags: string;
}

/** Every .ts file under SOURCES, as a path from the repository's root. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const literalText = (node: ts.Node | undefined) =>
  node && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) ? node.text : undefined;

/** Names the file binds to a regex literal (`const NAME = /.../`): handing one to match is fine. */
function regexNames(file: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const visit = (node: ts.Node) => {
    if (
      ts.isVariableDeclaration(node) &&
      ts.isIdentifier(node.name) &&
      node.initializer?.kind === ts.SyntaxKind.RegularExpressionLiteral
    )
      names.add(node.name.text);
    ts.forEachChild(node, visit);
  };
  visit(file);
  return names;
}

const isRegExpCallee = (node: ts.Expression) =>
  (ts.isIdentifier(node) && node.text === 'RegExp') ||
  (ts.isPropertyAccessExpression(node) && node.name.text === 'RegExp');

/** `new RegExp(...)` or `RegExp(...)`: written out when its pattern and flags are string literals. */
function regExpCall(node: ts.NewExpression | ts.CallExpression): Omit<Pattern, 'where'> | 'built' {
  const texts = (node.arguments ?? []).map(literalText);
  const [source, flags = ''] = texts;
  return source !== undefined && texts.length <= 2 && texts.every((text) => text !== undefined)
    ? { source, flags }
    : 'built';
}

/** match/matchAll/search handed anything but a regex: a string there becomes one. */
function handsTextToRegex(node: ts.CallExpression, names: Set<string>): boolean {
  if (!ts.isPropertyAccessExpression(node.expression)) return false;
  if (!['match', 'matchAll', 'search'].includes(node.expression.name.text)) return false;
  const [argument] = node.arguments;
  if (argument?.kind === ts.SyntaxKind.RegularExpressionLiteral) return false;
  return !(argument && ts.isIdentifier(argument) && names.has(argument.text));
}

/** What a node is: a pattern written out, a regex built from text at run time, or neither. */
function regexAt(node: ts.Node, names: Set<string>): Omit<Pattern, 'where'> | 'built' | undefined {
  if (node.kind === ts.SyntaxKind.RegularExpressionLiteral) {
    const text = node.getText();
    const end = text.lastIndexOf('/');
    return { source: text.slice(1, end), flags: text.slice(end + 1) };
  }
  if ((ts.isNewExpression(node) || ts.isCallExpression(node)) && isRegExpCallee(node.expression))
    return regExpCall(node);
  if (ts.isCallExpression(node) && handsTextToRegex(node, names)) return 'built';
  return undefined;
}

/**
 * The patterns written in the sources, and the places that build one from text at run time, as
 * `file: the construction`.
 */
function patternsInSources() {
  const written: Pattern[] = [];
  const built: string[] = [];
  for (const path of SOURCES.flatMap(sourceFiles)) {
    const text = readFileSync(join(ROOT, path), 'utf8');
    const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const names = regexNames(file);
    const visit = (node: ts.Node) => {
      const found = regexAt(node, names);
      if (found === 'built') built.push(`${path}: ${node.getText()}`);
      else if (found) {
        const line = file.getLineAndCharacterOfPosition(node.getStart()).line + 1;
        written.push({ where: `${path}:${line}`, ...found });
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return { written, built };
}

/** Every route's path template, from every endpoint group's route table (the service's and the license server's). */
function routeTemplates(): string[] {
  const groups = ['functions', 'license-server/functions'].flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((name) => name.endsWith('.ts'))
      .map((name) => join(ROOT, dir, name)),
  );
  return groups.flatMap((path) => {
    const { routes } = require(path) as { routes?: { path: string }[] };
    return (routes ?? []).map((route) => route.path);
  });
}

/**
 * Each place that builds a regex at run time, as its code reads, and the patterns it can build:
 * changing the construction fails this test until it is read again here.
 */
const DYNAMIC: Record<string, () => Pattern[]> = {
  // The 404/405 fallback matches the request's path against each route's template.
  "lib/http/handler.ts: new RegExp(`^${template.replace(/\\{[^/]+\\}/g, '[^/]+')}/?$`)": () =>
    [...new Set(routeTemplates())].map((template) => ({
      where: `lib/http/handler.ts, route ${template}`,
      source: `^${template.replace(/\{[^/]+\}/g, '[^/]+')}/?$`,
      flags: '',
    })),
};

const { written, built } = patternsInSources();

const allowed = (pattern: Pattern) =>
  (NEVER_CALLER_INPUT[pattern.where.split(':')[0] as string] ?? []).some((a) => a.source === pattern.source);

/** 'linear' when recheck proves it, else what it found: the complexity and an attack string. */
function verdict(found: Diagnostics): string {
  if (found.status === 'safe') return 'linear';
  if (found.status === 'vulnerable') {
    return `${found.complexity.summary}: attack ${found.attack.pattern} (${found.checker} checker)`;
  }
  return `unknown: ${found.error.kind}${'message' in found.error ? ` ${found.error.message}` : ''}`;
}

describe('every regular expression in the sources matches in linear time', () => {
  it('finds the regex literals of lib/, functions/ and license-server/', () => {
    // The enumeration itself works: issue 35's column names are made with one of them.
    expect(written.length).toBeGreaterThan(50);
    expect(written).toContainEqual({
      where: expect.stringMatching(/^lib\/admin\/import-infer\.ts:\d+$/),
      source: '[^a-z0-9_]+',
      flags: 'g',
    });
  });

  it.each(
    written.filter((pattern) => !allowed(pattern)).map((p) => [`${p.where} /${p.source}/${p.flags}`, p]),
  )(
    '%s',
    async (_, pattern) => {
      expect(verdict(await check(pattern.source, pattern.flags, CHECK))).toBe('linear');
    },
    60_000,
  );

  it('builds a regex at run time only where DYNAMIC names the patterns it can build', () => {
    expect(built.sort()).toEqual(Object.keys(DYNAMIC).sort());
  });

  it.each(Object.entries(DYNAMIC))(
    'checks what %s builds',
    async (_, patterns) => {
      const found = patterns();
      expect(found.length).toBeGreaterThan(0);
      for (const pattern of found) {
        expect([pattern.where, verdict(await check(pattern.source, pattern.flags, CHECK))]).toEqual([
          pattern.where,
          'linear',
        ]);
      }
    },
    300_000,
  );

  it('allows a super-linear pattern only where it still is, and still is super-linear', async () => {
    for (const [file, entries] of Object.entries(NEVER_CALLER_INPUT)) {
      for (const { source } of entries) {
        const pattern = written.find((p) => p.where.startsWith(`${file}:`) && p.source === source);
        expect([file, source, pattern && 'found']).toEqual([file, source, 'found']);
        const flags = pattern?.flags ?? '';
        expect(verdict(await check(source, flags, CHECK))).not.toBe('linear');
      }
    }
  }, 60_000);
});
