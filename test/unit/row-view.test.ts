import { type FilterInput, filterFacts, parseFilters } from '#lib/admin/row-filter';
import { afterSql, MAX_ORDER_KEYS, parseOrder } from '#lib/admin/row-view';
import type { TableInfo } from '#lib/db/catalog';

/** A table of `n` integer columns c0..c(n-1), keyed by c0. */
const wide = (n: number): TableInfo => ({
  schema: 's',
  table: 't',
  kind: 'table',
  primaryKey: ['c0'],
  columns: Array.from({ length: n }, (_, i) => ({
    name: `c${i}`,
    type: 'integer',
    valueType: 'integer',
    notNull: i === 0,
    deterministic: true,
  })),
});

describe('order', () => {
  it(`names at most ${MAX_ORDER_KEYS} columns`, () => {
    const names = (n: number) => Array.from({ length: n }, (_, i) => `c${i + 1}`).join(',');

    expect(parseOrder(names(MAX_ORDER_KEYS), wide(40))).toHaveLength(MAX_ORDER_KEYS + 1);
    expect(() => parseOrder(names(MAX_ORDER_KEYS + 1), wide(40))).toThrow(/at most 32/);
  });
});

describe('the condition after a cursor', () => {
  it('grows with the number of keys, not with its square', () => {
    const sizeFor = (n: number) => {
      const info = wide(n + 1);
      const keys = parseOrder(
        Array.from(
          { length: Math.min(n, MAX_ORDER_KEYS) },
          (_, i) => `c${i + 1}${i % 2 ? '.desc' : ''}`,
        ).join(','),
        info,
      );
      let bound = 0;
      return (
        afterSql(
          keys,
          keys.map(() => '1'),
          'r',
          () => `$${++bound}`,
        ).length / keys.length
      );
    };

    expect(sizeFor(32)).toBeLessThan(2 * sizeFor(4));
  });
});

describe('what a filter says of every row it lets through', () => {
  const info = wide(3);

  it.each<[FilterInput, Record<string, string>, string[]]>([
    [{ filter: ['c1.eq.5'] }, { c1: '5' }, ['c1']],
    [{ filter: ['c1.eq.5', 'c1.eq.6'] }, { c1: '5' }, ['c1']],
    [{ filter: ['c1.not.eq.5', 'c2.like.4*'] }, {}, ['c1', 'c2']],
    [{ filter: ['c1.is.null', 'c2.is.unknown'] }, {}, []],
    [{ filter: ['c1.not.is.null', 'c2.is.true'] }, {}, ['c1', 'c2']],
    [{ filter: ['c1.not.is.true', 'c2.not.is.unknown'] }, {}, ['c2']],
    [{ or: '(c1.eq.1,c2.eq.2)' }, {}, []],
    [{ and: '(c1.eq.1,and(c2.gt.2))' }, { c1: '1' }, ['c1', 'c2']],
    [{ and: '(not.and(c1.eq.1))' }, {}, []],
  ])('%j fixes %j and keeps NULL out of %j', (filter, equal, notNull) => {
    const facts = filterFacts(parseFilters(filter), info.columns, info.table);

    expect([Object.fromEntries(facts.equal), [...facts.notNull].sort()]).toEqual([equal, notNull]);
  });
});

describe('the condition after a cursor, under a filter', () => {
  const info = wide(3);
  const after = (order: string, filter: FilterInput, values: string[]) => {
    let bound = 0;
    const facts = filterFacts(parseFilters(filter), info.columns, info.table);
    return afterSql(parseOrder(order, info), values, 'r', () => `$${++bound}`, facts);
  };

  it('needs no IS NULL branch for a column the filter keeps from NULL', () => {
    expect(after('c1', {}, ['5', '9'])).toBe(
      '((r."c1", r."c0") > ($1::integer, $2::integer) OR r."c1" IS NULL)',
    );
    expect(after('c1', { filter: ['c1.gt.1'] }, ['5', '9'])).toBe(
      '(r."c1", r."c0") > ($1::integer, $2::integer)',
    );
  });

  it('compares the other keys alone when the cursor’s row holds the value an eq fixes', () => {
    const condition = after('c1,c2', { filter: ['c1.eq.5', 'c2.gt.0'] }, ['5', '3', '9']);

    // The test of bound values PostgreSQL settles while planning, and the branch it keeps.
    expect(condition).toMatch(
      /^\(\(\(\$1::integer IS NOT DISTINCT FROM \$2::integer\) AND \(r\."c2", r\."c0"\) > \(\$3::integer, \$4::integer\)\) OR \(NOT /,
    );
  });
});
