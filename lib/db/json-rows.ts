import pg from 'pg';

/**
 * The pg type parsers for a tenant's rows, which only ever leave as JSON: pg's own, but a
 * timestamptz goes straight to the text JSON.stringify would make of its Date, with no Date made.
 */

const { builtins } = pg.types;

/** A timestamptz as PostgreSQL prints it in UTC with the ISO DateStyle, microseconds optional. */
const UTC_TIMESTAMPTZ = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?\+00$/;

/**
 * A timestamptz straight to what JSON.stringify makes of the Date pg parses it to: `2026-11-24
 * 09:30:00.123456+00` → `2026-11-24T09:30:00.123Z` (milliseconds truncated, as the Date has them).
 * Parsing to a Date only to print it again cost about 2 µs a value, a tenth of a page read's CPU
 * with one such column. Any other form (another offset or DateStyle, BC, years past 9999,
 * infinity) is parsed as ever.
 */
export function timestamptzForJson(value: string): unknown {
  if (!UTC_TIMESTAMPTZ.test(value)) return parseTimestamptz(value);
  const fraction = value.length > 22 ? `${value.slice(20, -3)}00`.slice(0, 3) : '000';
  return `${value.slice(0, 10)}T${value.slice(11, 19)}.${fraction}Z`;
}

const parseTimestamptz = pg.types.getTypeParser(builtins.TIMESTAMPTZ, 'text');

/**
 * The parsers for rows that only ever leave as JSON (a tenant's data: lib/db/result-limits
 * boundedQuery): pg's own (lib/db/pool sets them), but timestamptz as timestamptzForJson.
 * dbadmin's own reads keep their Dates.
 */
export const jsonRowTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === builtins.TIMESTAMPTZ && format !== 'binary'
      ? timestamptzForJson
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};
