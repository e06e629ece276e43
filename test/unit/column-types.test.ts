import { columnTypeSql, defaultSql } from '#lib/db/column-types';

describe('columnTypeSql', () => {
  it.each([
    ['INTEGER', undefined, 'integer'],
    ['int', undefined, 'integer'],
    ['double precision', undefined, 'double precision'],
    ['VARCHAR(255)', undefined, 'varchar(255)'],
    ['VARCHAR', 40, 'varchar(40)'],
    ['varchar', undefined, 'varchar'],
    ['CHAR(3)', 3, 'char(3)'],
    ['DECIMAL(10,2)', undefined, 'numeric(10,2)'],
    ['numeric ( 12 )', undefined, 'numeric(12)'],
    ['TIMESTAMPTZ', undefined, 'timestamptz'],
    ['bigserial', undefined, 'bigserial'],
    ['  double   PRECISION  ', undefined, 'double precision'],
    ['\tDECIMAL ( 10 , 2 )\t', undefined, 'numeric(10,2)'],
  ])('maps %s (length %s) to %s', (type, length, sql) => {
    expect(columnTypeSql(type, length)).toBe(sql);
  });

  it.each([
    ['MONEY', undefined, /not supported/],
    ['TEXT[]', undefined, /not supported/],
    ['VARCHAR(10) COLLATE "C"', undefined, /not supported/],
    ['INTEGER(4)', undefined, /takes no length/],
    ['VARCHAR(10,2)', undefined, /one length/],
    ['VARCHAR(10)', 20, /disagree/],
    ['VARCHAR(0)', undefined, /between 1/],
    ['NUMERIC(3,4)', undefined, /scale/],
    ['NUMERIC', 5, /precision in its name/],
    ['DOUBLE\tPRECISION', undefined, /not supported/],
    [`INTEGER${' '.repeat(100)}`, undefined, /not supported/],
  ])('refuses %s (length %s)', (type, length, message) => {
    expect(() => columnTypeSql(type, length)).toThrow(message);
  });
});

describe('defaultSql', () => {
  it('passes the named expressions through, whatever their case', () => {
    expect(defaultSql('NOW()')).toBe('now()');
    expect(defaultSql('current_timestamp')).toBe('CURRENT_TIMESTAMP');
    expect(defaultSql('gen_random_uuid()')).toBe('gen_random_uuid()');
    expect(defaultSql('TRUE')).toBe('true');
  });

  it('quotes everything else as a literal', () => {
    expect(defaultSql("it's; DROP TABLE x")).toBe("'it''s; DROP TABLE x'");
    expect(defaultSql('0042')).toBe("'0042'");
    expect(defaultSql(3.5)).toBe("'3.5'");
    expect(defaultSql('now() + 1')).toBe("'now() + 1'");
  });
});
