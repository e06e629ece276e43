import { ApiError, api } from '../api';
import type { Explained } from './plan-tree';
import type { StatementResult } from './sql-results';

/**
 * The SQL page's two ways to run a script: whole, in one transaction (the default: all or
 * nothing), or a statement at a time, each its own request and transaction, stopping at the first
 * that fails, what ran before it kept and shown (as psql's autocommit with ON_ERROR_STOP).
 */

export interface Answer {
  /** Each statement's, in order. */
  results: StatementResult[];
  /** An explained statement's plan (sent with explain). */
  plan?: Explained[];
  duration: number;
  /** Where it ran: the schema sent, or the one the SQL names (lib/admin/query-schema). */
  schema: string;
}

export interface Outcome {
  /** What ran; undefined when nothing did. */
  answer: Answer | undefined;
  failure?: unknown;
}

export type Send = (sql: string) => Promise<Answer>;

export const runWhole = (sql: string, send: Send): Promise<Outcome> =>
  send(sql).then(
    (answer) => ({ answer }),
    (failure: unknown) => ({ answer: undefined, failure }),
  );

export async function runEach(sql: string, send: Send): Promise<Outcome> {
  let bounds: { start: number; end: number }[];
  try {
    bounds = (await api<{ statements: typeof bounds }>('POST', 'sql/split', { body: { sql } })).statements;
  } catch (failure) {
    return { answer: undefined, failure };
  }
  // The parser counts characters (code points), as Array.from does.
  const characters = Array.from(sql);
  const answer: Answer = { results: [], duration: 0, schema: '' };
  for (const { start, end } of bounds) {
    try {
      const one = await send(characters.slice(start, end).join(''));
      answer.results.push(...one.results);
      answer.duration += one.duration;
      answer.schema = one.schema;
    } catch (failure) {
      // The error's position in the script, not in its statement.
      const position = failure instanceof ApiError ? Number(failure.details.position) : Number.NaN;
      if (failure instanceof ApiError && Number.isInteger(position)) {
        failure.details.position = position + start;
      }
      return { answer: answer.results.length > 0 ? answer : undefined, failure };
    }
  }
  return { answer };
}
