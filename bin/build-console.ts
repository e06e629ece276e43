/**
 * Bundles the web console (console/src) with esbuild into console/dist/bundle.json: every file
 * with a content hash in its name, and which of them the page loads first. The `console`
 * function embeds that JSON, so the console ships inside the function on Lambda and needs no
 * file system at run time. Run by the serverless plugin before packaging and before
 * serverless-offline starts, by the test setup, and by `npm run build:console`.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const ROOT = resolve(__dirname, '..');
export const BUNDLE_FILE = join(ROOT, 'console', 'dist', 'bundle.json');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

export interface ConsoleBundle {
  /** File name -> content type and text. */
  assets: Record<string, { type: string; body: string }>;
  /** The entry script and style sheet the page links; other scripts load on demand. */
  script: string;
  style: string;
}

export async function buildConsole(outFile = BUNDLE_FILE): Promise<ConsoleBundle> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { main: 'console/src/main.tsx' },
    bundle: true,
    splitting: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: 'console/dist/assets',
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    assetNames: '[name]-[hash]',
    legalComments: 'none',
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  const assets: ConsoleBundle['assets'] = {};
  for (const file of result.outputFiles) {
    const type = TYPES[extname(file.path)];
    if (!type) throw new Error(`build-console: unexpected output ${file.path}`);
    assets[basename(file.path)] = { type, body: file.text };
  }
  const names = Object.keys(assets);
  const script = names.find((name) => /^main-.*\.js$/.test(name));
  const style = names.find((name) => /^main-.*\.css$/.test(name));
  if (!script || !style) throw new Error('build-console: no main script or style sheet');
  const bundle: ConsoleBundle = { assets, script, style };
  mkdirSync(join(outFile, '..'), { recursive: true });
  // Written whole, then renamed: a build running beside this one (tests) never reads half a file.
  const partial = `${outFile}.${process.pid}.partial`;
  writeFileSync(partial, JSON.stringify(bundle));
  renameSync(partial, outFile);
  return bundle;
}

/** Gzipped bytes of what the first load fetches: the page's script, its static imports, the style. */
export function firstLoadBytes(bundle: ConsoleBundle): { raw: number; gzip: number; files: string[] } {
  const files = new Set([bundle.script, bundle.style]);
  const pending = [bundle.script];
  while (pending.length > 0) {
    const body = bundle.assets[pending.pop() as string]?.body ?? '';
    // Static imports only (`from"./chunk-X.js"`); `import("./chunk-Y.js")` loads on demand.
    for (const match of body.matchAll(/(?:from|import)\s*"\.\/([^"]+\.js)"/g)) {
      const name = match[1] as string;
      if (!files.has(name)) {
        files.add(name);
        pending.push(name);
      }
    }
  }
  let raw = 0;
  let gzip = 0;
  for (const name of files) {
    const body = bundle.assets[name]?.body ?? '';
    raw += Buffer.byteLength(body);
    gzip += gzipSync(body, { level: 9 }).length;
  }
  return { raw, gzip, files: [...files] };
}

if (require.main === module) {
  buildConsole().then(
    (bundle) => {
      const { raw, gzip } = firstLoadBytes(bundle);
      console.log(
        `build-console: ${Object.keys(bundle.assets).length} files in ${BUNDLE_FILE}; first load ${(raw / 1024).toFixed(1)} KB, ${(gzip / 1024).toFixed(1)} KB gzipped`,
      );
    },
    (error: Error) => {
      console.error(`build-console: ${error.message}`);
      process.exitCode = 1;
    },
  );
}
