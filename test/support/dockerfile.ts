/**
 * Just enough of Docker to build an image's file set without a Docker engine (CI has none): the
 * Dockerfile's stages, WORKDIR, ENV, COPY (from the context, minus .dockerignore, or from an
 * earlier stage) and RUN, each run with the host's node and npm in a directory that stands for
 * the image's root. What the image is made of is then exactly what its own commands make.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface Instruction {
  op: string;
  /** The arguments as written (flags removed); JSON form is parsed. */
  args: string[];
  flags: Record<string, string>;
  raw: string;
}

export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

function parseInstruction(line: string): Instruction {
  const [, op = '', rest = ''] = /^(\S+)\s*(.*)$/s.exec(line) ?? [];
  const flags: Record<string, string> = {};
  let body = rest;
  for (let flag = /^--([a-z-]+)=(\S+)\s+/.exec(body); flag; flag = /^--([a-z-]+)=(\S+)\s+/.exec(body)) {
    flags[flag[1] as string] = flag[2] as string;
    body = body.slice(flag[0].length);
  }
  const json = /^(CMD\s+)?(\[.*\])$/s.exec(body);
  // `CMD [...]` and `HEALTHCHECK ... CMD [...]` in JSON form; anything else as one string.
  const args = json ? [...(json[1] ? ['CMD'] : []), ...(JSON.parse(json[2] as string) as string[])] : [body];
  return { op: op.toUpperCase(), args, flags, raw: line };
}

export function parseDockerfile(text: string): Stage[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const instruction = parseInstruction(line);
    if (instruction.op === 'FROM') {
      const [from = '', , name] = (instruction.args[0] ?? '').split(/\s+/);
      stages.push({ from, name, instructions: [] });
    } else stages.at(-1)?.instructions.push(instruction);
  }
  return stages;
}

/** `ENV A=1 B=2` (the form our Dockerfile uses) as pairs, `$NAME` taken from `env`. */
export function envPairs(instruction: Instruction, env: Record<string, string>): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const [, name = '', value = ''] of (instruction.args[0] ?? '').matchAll(/(\w+)=(\S+)/g)) {
    pairs[name] = value.replace(/\$(\w+)/g, (_, ref: string) => env[ref] ?? '');
  }
  return pairs;
}

/** .dockerignore's patterns that matter here: names and paths from the context's root, and `*.ext`. */
function ignored(context: string): (path: string) => boolean {
  const file = join(context, '.dockerignore');
  const patterns = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line && !line.startsWith('#'))
    : [];
  return (path) =>
    patterns.some((pattern) =>
      pattern.startsWith('*.')
        ? path.endsWith(pattern.slice(1))
        : path === pattern || path.startsWith(`${pattern}/`),
    );
}

export interface BuiltStage {
  /** Stands for the image's `/`. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  user?: string;
  /** The image's path as a path on this machine. */
  hostPath: (path: string) => string;
}

/**
 * Builds the stages in order under `into` (one directory per stage) and returns the last one.
 * RUN commands see the image's ENV, with paths under WORKDIR mapped onto the stand-in root.
 */
export function buildStages(
  stages: Stage[],
  context: string,
  into: string,
  shortcuts: Shortcuts = {},
): BuiltStage {
  const built = new Map<string, BuiltStage>();
  const skip = ignored(context);
  let last: BuiltStage | undefined;
  stages.forEach((stage, index) => {
    const root = join(into, `stage-${index}`);
    const current: BuiltStage = {
      root,
      workdir: '/',
      env: {},
      hostPath: (path) => join(root, path.startsWith('/') ? path : join(current.workdir, path)),
    };
    for (const instruction of stage.instructions)
      runInstruction(instruction, current, { built, context, skip, shortcuts });
    built.set(stage.name ?? String(index), current);
    last = current;
  });
  if (!last) throw new Error('Dockerfile has no stage');
  return last;
}

/** An image path in a value (`/app/dist/bin:$PATH`) as the stand-in's host path. */
export const mapPaths = (value: string, stage: BuiltStage) =>
  value
    .split(':')
    .map((part) => (part.startsWith(stage.workdir) && stage.workdir !== '/' ? stage.hostPath(part) : part))
    .join(':');

/**
 * RUN commands whose result is already at hand, by their exact text: what to do instead, in the
 * command's working directory. (CI has just run the same `npm ci` on the same lock file.)
 */
export type Shortcuts = Record<string, (cwd: string) => void>;

interface Build {
  built: Map<string, BuiltStage>;
  context: string;
  skip: (path: string) => boolean;
  shortcuts: Shortcuts;
}

function runInstruction(instruction: Instruction, stage: BuiltStage, build: Build): void {
  const [first = ''] = instruction.args;
  switch (instruction.op) {
    case 'WORKDIR':
      stage.workdir = first;
      mkdirSync(stage.hostPath(first), { recursive: true });
      return;
    case 'ENV':
      Object.assign(stage.env, envPairs(instruction, { ...stage.env, PATH: process.env.PATH ?? '' }));
      return;
    case 'USER':
      stage.user = first;
      return;
    case 'COPY':
      copy(instruction, stage, build);
      return;
    case 'RUN': {
      const shortcut = build.shortcuts[first];
      if (shortcut) {
        shortcut(stage.hostPath(stage.workdir));
        return;
      }
      const env = Object.fromEntries(Object.entries(stage.env).map(([k, v]) => [k, mapPaths(v, stage)]));
      execFileSync('sh', ['-c', first], {
        cwd: stage.hostPath(stage.workdir),
        env: { ...process.env, ...env },
        stdio: 'pipe',
      });
      return;
    }
    default:
      return; // EXPOSE, VOLUME, HEALTHCHECK, CMD: metadata, checked by the tests themselves
  }
}

/** COPY's sources and destination (JSON or plain form). */
function copyArgs(instruction: Instruction): { sources: string[]; dest: string } {
  const words = instruction.args.length > 1 ? instruction.args : (instruction.args[0] ?? '').split(/\s+/);
  const all = words.map((word) => word.trim()).filter(Boolean);
  return { sources: all.slice(0, -1), dest: all.at(-1) ?? '' };
}

function copy(instruction: Instruction, stage: BuiltStage, { built, context, skip }: Build): void {
  const { sources, dest } = copyArgs(instruction);
  const stageName = instruction.flags.from;
  const from = stageName === undefined ? undefined : built.get(stageName);
  if (stageName !== undefined && !from) throw new Error(`no stage ${stageName}`);
  const target = stage.hostPath(dest);
  for (const source of sources) {
    const path = from ? from.hostPath(source) : join(context, source);
    if (!from && skip(source)) throw new Error(`COPY ${source}: excluded by .dockerignore`);
    if (!existsSync(path)) throw new Error(`COPY ${source}: no such file`);
    const into = statSync(path).isDirectory() || !dest.endsWith('/') ? target : join(target, source);
    mkdirSync(join(into, '..'), { recursive: true });
    cpSync(path, into, {
      recursive: true,
      filter: (file) => from !== undefined || !skip(relative(context, file)),
    });
  }
}
