import { readFileSync } from 'node:fs';

const ReservedConcurrency = require('../../deploy/concurrency-plugin.cjs');

class ServerlessError extends Error {}

type Functions = Record<string, { handler: string; reservedConcurrency?: number }>;

/** Packages the functions with DBADMIN_RESERVED_CONCURRENCY set to `setting`; returns them. */
function packaged(setting: string | undefined): Functions {
  const functions: Functions = {
    health: { handler: 'functions/health.handler' },
    tables: { handler: 'functions/tables.handler' },
    query: { handler: 'functions/query.handler' },
  };
  const plugin = new ReservedConcurrency({ service: { functions }, classes: { Error: ServerlessError } });
  plugin.apply(setting);
  return functions;
}

const reserved = (functions: Functions) =>
  Object.fromEntries(Object.entries(functions).map(([name, fn]) => [name, fn.reservedConcurrency]));

describe('DBADMIN_RESERVED_CONCURRENCY', () => {
  it('reserves nothing when unset', () => {
    expect(reserved(packaged(undefined))).toEqual({ health: undefined, tables: undefined, query: undefined });
  });

  it('reserves the same number for every function', () => {
    expect(reserved(packaged('5'))).toEqual({ health: 5, tables: 5, query: 5 });
  });

  it('reserves per function, the others left unreserved', () => {
    expect(reserved(packaged('tables=8, query=2'))).toEqual({ health: undefined, tables: 8, query: 2 });
  });

  it('takes a number for the rest beside named functions', () => {
    expect(reserved(packaged('query=2,4'))).toEqual({ health: 4, tables: 4, query: 2 });
  });

  it('accepts 0, which stops a function', () => {
    expect(reserved(packaged('query=0')).query).toBe(0);
  });

  it.each([
    ['tabels=3', /DBADMIN_RESERVED_CONCURRENCY: no function "tabels" \(functions: health, tables, query\)/],
    ['tables=three', /DBADMIN_RESERVED_CONCURRENCY: "tables=three" is not/],
    ['-1', /DBADMIN_RESERVED_CONCURRENCY: "-1" is not/],
    ['2.5', /DBADMIN_RESERVED_CONCURRENCY: "2.5" is not/],
  ])('stops packaging on %s, naming the mistake', (setting, message) => {
    expect(() => packaged(setting)).toThrow(ServerlessError);
    expect(() => packaged(setting)).toThrow(message);
  });
});

it('is read when the service is packaged or deployed', () => {
  expect(readFileSync('serverless.yml', 'utf8')).toMatch(/^ {2}- \.\/deploy\/concurrency-plugin\.cjs$/m);
});
