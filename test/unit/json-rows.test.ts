import pg from 'pg';
import { jsonRowTypes, timestamptzForJson } from '#lib/db/json-rows';

const TIMESTAMPTZ = pg.types.builtins.TIMESTAMPTZ;
const asPgParsesIt = pg.types.getTypeParser(TIMESTAMPTZ, 'text');
const json = (value: unknown) => JSON.stringify({ value });

/** A deterministic spread of values, so a failure names the same value every run. */
function* utcTimestamps(): Generator<string> {
  let seed = 20261124;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const pad = (n: number, width: number) => String(n).padStart(width, '0');
  for (let i = 0; i < 20_000; i++) {
    const date = `${pad(1 + next(9999), 4)}-${pad(1 + next(12), 2)}-${pad(1 + next(28), 2)}`;
    const time = `${pad(next(24), 2)}:${pad(next(60), 2)}:${pad(next(60), 2)}`;
    const digits = next(7);
    const fraction = digits === 0 ? '' : `.${pad(next(10 ** digits), digits).replace(/0+$/, '') || '1'}`;
    yield `${date} ${time}${fraction}+00`;
  }
  for (let ms = 0; ms < 1000; ms++) yield `2026-11-24 09:30:00.${pad(ms, 3)}999+00`;
  yield* ['0001-01-01 00:00:00+00', '0099-12-31 23:59:59.999999+00', '9999-12-31 23:59:59.999999+00'];
}

describe('timestamptz in rows that leave as JSON', () => {
  it('prints what JSON.stringify made of the Date pg parsed, for every UTC form PostgreSQL prints', () => {
    const differing: string[] = [];
    for (const value of utcTimestamps()) {
      if (json(timestamptzForJson(value)) !== json(asPgParsesIt(value))) differing.push(value);
    }
    expect(differing).toEqual([]);
  });

  it('takes the short way for UTC values only, and parses every other form as pg does', () => {
    expect(timestamptzForJson('2026-11-24 09:30:00.5+00')).toBe('2026-11-24T09:30:00.500Z');
    const others = [
      '2026-11-24 09:30:00+05:30',
      '2026-11-24 09:30:00.123-08',
      '2026-11-24 09:30:00+05:45:30',
      '0044-03-15 12:00:00+00 BC',
      '12026-11-24 09:30:00+00',
      'infinity',
      '-infinity',
      'Tue Nov 24 09:30:00 2026 UTC',
    ];
    for (const value of others) {
      expect(timestamptzForJson(value)).toEqual(asPgParsesIt(value));
    }
  });

  it('is what boundedQuery parses timestamptz with, and nothing else', () => {
    expect(jsonRowTypes.getTypeParser(TIMESTAMPTZ, 'text')).toBe(timestamptzForJson);
    for (const oid of [pg.types.builtins.INT8, pg.types.builtins.DATE, pg.types.builtins.JSONB]) {
      expect(jsonRowTypes.getTypeParser(oid, 'text')).toBe(pg.types.getTypeParser(oid, 'text'));
    }
  });
});
