import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import {
  type DisplayBudget,
  positioned,
  resultOf,
  runStatement,
  type ScriptStatement,
  Shown,
  type StatementResult,
} from '#lib/admin/query-statements';
import { CallerQuery } from '#lib/db/caller-query';
import { jsonRowTypes } from '#lib/db/json-rows';

/**
 * The admin's script in the SQL editor's answer, in as few round trips as keep each statement's
 * result: a query alone, from its portal (lib/admin/query-statements, so it stops at the rows
 * shown); the statements between queries together, as written, in one simple-protocol message
 * (a seed of 5,000 INSERTs is one round trip, not 5,000), each answering its own result.
 */

/** Runs of statements: each query alone, the others between them together. */
function runsOf(statements: ScriptStatement[]): ScriptStatement[][] {
  const runs: ScriptStatement[][] = [];
  for (const statement of statements) {
    const last = runs.at(-1);
    if (!statement.query && last && !last[0]?.query) last.push(statement);
    else runs.push([statement]);
  }
  return runs;
}

export async function runScriptShown(
  client: pg.ClientBase,
  sql: string,
  statements: ScriptStatement[],
  budget: DisplayBudget,
): Promise<StatementResult[]> {
  const characters = [...sql];
  const results: StatementResult[] = [];
  for (const run of runsOf(statements)) {
    const [first] = run;
    const last = run.at(-1);
    if (!first || !last) continue;
    if (run.length === 1) results.push(await runStatement(client, first, budget));
    else {
      const text = characters.slice(first.start, last.end).join('');
      results.push(...(await runTogether(client, text, run.length, first.start, budget)));
    }
  }
  return results;
}

/**
 * Statements sent as one message, as written (their semicolons and comments kept, so an error's
 * position maps back to the script by the first one's start); each one's rows shown while the
 * budget lasts, the rest read and let go. Their time is the last one's (the others' is null).
 */
async function runTogether(
  client: pg.ClientBase,
  text: string,
  count: number,
  start: number,
  budget: DisplayBudget,
): Promise<StatementResult[]> {
  const started = performance.now();
  const shown = new Map<unknown, Shown>();
  const shownFor = (result: unknown) => {
    const rows = shown.get(result) ?? new Shown(budget);
    shown.set(result, rows);
    return rows;
  };
  const query = new CallerQuery({ text, types: jsonRowTypes } as pg.QueryConfig);
  query.on('row', (row: unknown, result?: unknown) => shownFor(result).add(row));
  const ended = await new Promise<pg.QueryResult[]>((resolve, reject) => {
    query.on('error', (error: Error) => reject(positioned(error, start)));
    query.on('end', (end: pg.QueryResult | pg.QueryResult[]) => resolve(Array.isArray(end) ? end : [end]));
    client.query(query);
  });
  const duration = Math.round(performance.now() - started);
  return ended
    .slice(0, count)
    .map((result, index) => resultOf(result, shownFor(result), index === ended.length - 1 ? duration : null));
}
