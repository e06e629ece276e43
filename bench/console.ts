/**
 * Web console size (npm run bench:console): what a browser fetches on the first load (page
 * script, its static imports, the style sheet), gzipped, next to the 300 KB budget and to a
 * baseline built in the same run: Preact alone, rendering one element, bundled the same way.
 */
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { buildConsole, firstLoadBytes } from '../bin/build-console';

const BUDGET = 300 * 1024;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;

async function baseline(): Promise<{ raw: number; gzip: number }> {
  const result = await build({
    stdin: {
      contents: "import { render, h } from 'preact'; render(h('p', null, 'hi'), document.body);",
      resolveDir: __dirname,
    },
    bundle: true,
    minify: true,
    format: 'esm',
    write: false,
  });
  const text = result.outputFiles[0]?.text ?? '';
  return { raw: Buffer.byteLength(text), gzip: gzipSync(text, { level: 9 }).length };
}

async function main() {
  const bundle = await buildConsole();
  const first = firstLoadBytes(bundle);
  const onDemand = Object.keys(bundle.assets).filter((name) => !first.files.includes(name));
  const later = onDemand.reduce(
    (sum, name) => sum + gzipSync(bundle.assets[name]?.body ?? '', { level: 9 }).length,
    0,
  );
  const base = await baseline();
  console.table([
    {
      what: 'Preact alone (baseline)',
      raw: kb(base.raw),
      gzip: kb(base.gzip),
      'vs budget': `${((100 * base.gzip) / BUDGET).toFixed(0)}%`,
    },
    {
      what: 'console, first load',
      raw: kb(first.raw),
      gzip: kb(first.gzip),
      'vs budget': `${((100 * first.gzip) / BUDGET).toFixed(0)}%`,
    },
    { what: 'SQL editor, on demand', raw: '', gzip: kb(later), 'vs budget': '' },
  ]);
  if (first.gzip > BUDGET) {
    console.error(`first load ${kb(first.gzip)} gzipped is over the ${kb(BUDGET)} budget`);
    process.exitCode = 1;
  }
}

main();
