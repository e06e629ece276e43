import { afterSql, MAX_ORDER_KEYS, parseOrder } from '#lib/admin/row-view';
import type { TableInfo } from '#lib/db/catalog';

/** A table of `n` integer columns c0..c(n-1), keyed by c0. */
const wide = (n: number): TableInfo => ({
  schema: 's',
  table: 't',
  primaryKey: ['c0'],
  columns: Array.from({ length: n }, (_, i) => ({
    name: `c${i}`,
    type: 'integer',
    valueType: 'integer',
    notNull: i === 0,
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
