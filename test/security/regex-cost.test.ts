import { performance } from 'node:perf_hooks';
import { CSV_DEFAULTS, JsonRowSplitter } from '#lib/admin/import-format';
import { inferColumns } from '#lib/admin/import-infer';

/**
 * A value a caller sends costs what its length costs, whatever characters it is made of: a
 * regular expression that backtracks over a run of one character would let one request hold the
 * process every function shares locally (issue 35: a header of 120,000 underscores took 10.5 s
 * where 120,000 letters took 0.3 s, and /api/health waited behind it). Each attack is timed next to
 * a plain value of the same length in the same run, so a loaded machine slows both alike; the
 * quadratic cost these guard against is thousands of times the plain one, the bound a few.
 */

/** Attack over plain at most this: linear work measures near 1, the quadratic one in the thousands. */
const MAX_RATIO = 5;

/** The fastest of `runs` timings of `work` done `times` over, in milliseconds. */
function fastest(work: () => void, runs: number, times: number): number {
  let best = Number.POSITIVE_INFINITY;
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    for (let i = 0; i < times; i++) work();
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

/**
 * The attack's cost over the plain value's, each `times` calls: the plain one's fastest of five
 * runs; the attack's best of up to three tries while it stays within a noisy machine's reach of
 * the bound. A try over the bound many times over ends there: a quadratic attack is not run again.
 */
function attackOverPlain(attack: () => void, plain: () => void, times: number): number {
  const baseline = fastest(plain, 5, times);
  const hopeless = MAX_RATIO * 20;
  let ratio = Number.POSITIVE_INFINITY;
  for (let run = 0; run < 3 && ratio > MAX_RATIO; run++) {
    const started = performance.now();
    let done = 0;
    while (done === 0 || (done < times && performance.now() - started < baseline * hopeless)) {
      attack();
      done++;
    }
    ratio = Math.min(ratio, ((performance.now() - started) * (times / done)) / baseline);
    if (ratio > hopeless) break;
  }
  return ratio;
}

const rejects = (work: () => unknown) => () => {
  try {
    work();
  } catch {
    return;
  }
  throw new Error('the attack was accepted');
};

describe('a value made of one repeated character costs what its length costs', () => {
  it('a CSV header of "a", 120,000 underscores and "b" costs about what 120,002 letters cost', () => {
    const header = (middle: string) => `a${middle}b,id\n${'x,1\n'.repeat(20)}`;
    const underscores = header('_'.repeat(120_000));
    const letters = header('c'.repeat(120_000));

    const ratio = attackOverPlain(
      () => inferColumns('csv', underscores, CSV_DEFAULTS),
      () => inferColumns('csv', letters, CSV_DEFAULTS),
      5,
    );

    expect(ratio).toBeLessThan(MAX_RATIO);
  }, 120_000);

  it('an NDJSON line of 60,000 escaped quotes costs about what 120,000 letters cost', () => {
    // "e999" passes the long-number test that sends a line through the JSON token pattern.
    const line = (body: string) => `{"n": 1e999, "s": ${body}\n`;
    const quotes = line(`"${'\\"'.repeat(60_000)}`);
    const letters = line(`"${'c'.repeat(120_000)}`);

    const ratio = attackOverPlain(
      rejects(() => new JsonRowSplitter('ndjson').push(quotes)),
      rejects(() => new JsonRowSplitter('ndjson').push(letters)),
      20,
    );

    expect(ratio).toBeLessThan(MAX_RATIO);
  }, 120_000);
});
