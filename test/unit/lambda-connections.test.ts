import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { LAMBDA_PROCESS_CONNECTIONS, parseConfig } from '#lib/config';
import { call } from '#test/support/http';
import { handlerModule, readServiceConfig } from '../../bin/build';
import * as counting from '../../bin/lambda-connections';
import {
  connectionsReport,
  type LambdaService,
  lambdaConnections,
  rdsDefaultMaxConnections,
  rdsUsableConnections,
} from '../../bin/lambda-connections';

const LambdaConnectionsCheck = require('../../deploy/lambda-connections-plugin.cjs');

class ServerlessError extends Error {}

/** A service of `functions`, with `environment` as packaging resolved provider.environment. */
const service = (
  functions: LambdaService['functions'],
  environment: Record<string, unknown> = {},
  withoutDatabase: string[] = [],
): LambdaService => ({
  provider: { environment },
  custom: { lambdaConnections: { withoutDatabase } },
  functions,
});

const fn = (reservedConcurrency?: unknown, environment?: Record<string, unknown>) => ({
  handler: 'functions/x.handler',
  ...(reservedConcurrency === undefined ? {} : { reservedConcurrency }),
  ...(environment ? { environment } : {}),
});

describe('the shipped serverless.yml', () => {
  // As `serverless package` counts it from a shell that sets none of the settings.
  const shipped = lambdaConnections(readServiceConfig(), {});

  it('bounds every function that reaches the database', () => {
    expect(shipped.problems).toEqual([]);
    expect(shipped.functions.filter((f) => f.database && f.reserved === undefined)).toEqual([]);
  });

  it('counts DB_PROCESS_CONNECTIONS at its Lambda default per container', () => {
    const perContainer = new Set(shipped.functions.filter((f) => f.database).map((f) => f.perContainer));

    expect([...perContainer]).toEqual([LAMBDA_PROCESS_CONNECTIONS]);
  });

  it('fits the ~395 connections a db.t4g.medium has for it', () => {
    expect(shipped.total).toBeGreaterThan(0);
    expect(shipped.total).toBeLessThanOrEqual(rdsUsableConnections(4));
  });

  it('prints each function and the total', () => {
    const report = connectionsReport(shipped);

    expect(report).toContainEqual(expect.stringMatching(/^ {2}query +8 +4 +32$/));
    expect(report).toContainEqual(expect.stringMatching(/^ {2}console +no database +0$/));
    expect(report).toContainEqual(
      expect.stringMatching(new RegExp(`^ {2}all functions +\\d+ +${shipped.total}$`)),
    );
  });

  it('says the total in its comment', () => {
    const reserved = shipped.functions.reduce((sum, f) => sum + (f.database ? (f.reserved ?? 0) : 0), 0);

    expect(readFileSync('serverless.yml', 'utf8')).toContain(
      `# ${reserved} × ${LAMBDA_PROCESS_CONNECTIONS} = ${shipped.total} as shipped`,
    );
  });

  it('passes the per-container budget and the limit through to the functions and to packaging', () => {
    const environment = readServiceConfig().provider.environment as Record<string, string>;

    // biome-ignore lint/suspicious/noTemplateCurlyInString: serverless's own variable syntax, verbatim.
    expect(environment.DB_PROCESS_CONNECTIONS).toBe("${env:DB_PROCESS_CONNECTIONS, ''}");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: serverless's own variable syntax, verbatim.
    expect(environment.DATABASE_MAX_CONNECTIONS).toBe("${env:DATABASE_MAX_CONNECTIONS, ''}");
  });

  it('reads the settings from the packaging shell', () => {
    const counted = lambdaConnections(readServiceConfig(), {
      DB_PROCESS_CONNECTIONS: '8',
      DATABASE_MAX_CONNECTIONS: '100',
    });

    expect(counted.total).toBe(shipped.total * 2);
    expect(counted.limit).toBe(100);
    expect(counted.problems).toEqual([expect.stringMatching(/more than DATABASE_MAX_CONNECTIONS 100/)]);
  });
});

describe('lambdaConnections', () => {
  it('sums reservedConcurrency × DB_PROCESS_CONNECTIONS over the functions', () => {
    const counted = lambdaConnections(service({ a: fn(3), b: fn(5) }, { DB_PROCESS_CONNECTIONS: '2' }));

    expect(counted.functions.map((f) => f.connections)).toEqual([6, 10]);
    expect(counted.total).toBe(16);
  });

  it('fails a total past DATABASE_MAX_CONNECTIONS in one line naming both and the fix', () => {
    const counted = lambdaConnections(service({ a: fn(20), b: fn(20) }, { DATABASE_MAX_CONNECTIONS: '100' }));

    expect(counted.total).toBe(160);
    expect(counted.problems).toEqual([
      'the functions may hold 160 database connections, more than DATABASE_MAX_CONNECTIONS 100: lower ' +
        'reservedConcurrency (serverless.yml or DBADMIN_RESERVED_CONCURRENCY) or DB_PROCESS_CONNECTIONS, ' +
        'or move to a larger instance class and raise DATABASE_MAX_CONNECTIONS with it',
    ]);
  });

  it('passes a total at the limit exactly', () => {
    expect(lambdaConnections(service({ a: fn(25) }, { DATABASE_MAX_CONNECTIONS: 100 })).problems).toEqual([]);
  });

  it('fails a function that reaches the database with no reservedConcurrency, limit or not', () => {
    for (const environment of [{}, { DATABASE_MAX_CONNECTIONS: '5000' }]) {
      const counted = lambdaConnections(service({ a: fn(2), b: fn(), c: fn() }, environment));

      expect(counted.problems).toEqual([
        expect.stringMatching(
          /^no reservedConcurrency, .* for functions that reach the database: b, c; give each/,
        ),
      ]);
    }
  });

  it('lets a function listed as never connecting go without one, and counts it as none', () => {
    const counted = lambdaConnections(
      service({ a: fn(2), web: fn(), cached: fn(50) }, {}, ['web', 'cached']),
    );

    expect(counted.problems).toEqual([]);
    expect(counted.total).toBe(2 * LAMBDA_PROCESS_CONNECTIONS);
  });

  it('fails a name under withoutDatabase that is no function', () => {
    expect(lambdaConnections(service({ a: fn(1) }, {}, ['consol'])).problems).toEqual([
      'custom.lambdaConnections.withoutDatabase names no function "consol"',
    ]);
  });

  it("takes a function's own DB_PROCESS_CONNECTIONS over the provider's, as Lambda does", () => {
    const counted = lambdaConnections(
      service({ a: fn(10, { DB_PROCESS_CONNECTIONS: 1 }), b: fn(10) }, { DB_PROCESS_CONNECTIONS: '3' }),
    );

    expect(counted.functions.map((f) => f.perContainer)).toEqual([1, 3]);
  });

  it('counts an empty setting as unset, as the functions read it', () => {
    const counted = lambdaConnections(
      service({ a: fn(1) }, { DB_PROCESS_CONNECTIONS: '', DATABASE_MAX_CONNECTIONS: '' }),
    );

    expect(counted.functions[0]?.perContainer).toBe(LAMBDA_PROCESS_CONNECTIONS);
    expect(counted.limit).toBeUndefined();
  });

  it('resolves env variables in serverless.yml as written, their fallbacks when unset', () => {
    const written = service(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: serverless's own variable syntax, verbatim.
      { a: fn('${env:A_RESERVED, 3}') },
      // biome-ignore lint/suspicious/noTemplateCurlyInString: serverless's own variable syntax, verbatim.
      { DB_PROCESS_CONNECTIONS: "${env:DB_PROCESS_CONNECTIONS, '2'}" },
    );

    expect(lambdaConnections(written, {}).total).toBe(6);
    expect(lambdaConnections(written, { A_RESERVED: '5', DB_PROCESS_CONNECTIONS: '4' }).total).toBe(20);
  });

  it.each([
    ['a reservedConcurrency', service({ a: fn(-1) }), /a's reservedConcurrency is -1, not a whole number/],
    ['a CloudFormation value', service({ a: fn({ Ref: 'X' }) }), /a's reservedConcurrency is \{"Ref":"X"\}/],
    ['DB_PROCESS_CONNECTIONS', service({ a: fn(1) }, { DB_PROCESS_CONNECTIONS: '0' }), /is "0", not a whole/],
    ['DATABASE_MAX_CONNECTIONS', service({}, { DATABASE_MAX_CONNECTIONS: 'many' }), /is "many", not a whole/],
  ])('fails %s it cannot count', (_what, given, message) => {
    expect(lambdaConnections(given).problems).toEqual([expect.stringMatching(message)]);
  });
});

describe('the report', () => {
  it('compares with DATABASE_MAX_CONNECTIONS when set', () => {
    const report = connectionsReport(
      lambdaConnections(service({ a: fn(10) }, { DATABASE_MAX_CONNECTIONS: '50' })),
    );

    expect(report).toContain('40 of DATABASE_MAX_CONNECTIONS 50: 10 to spare');
    expect(report.join('\n')).not.toMatch(/db\.t4g/);
  });

  it('says by how much a total is over', () => {
    const report = connectionsReport(
      lambdaConnections(service({ a: fn(20) }, { DATABASE_MAX_CONNECTIONS: '50' })),
    );

    expect(report).toContain('80 of DATABASE_MAX_CONNECTIONS 50: 30 too many');
  });

  it('names the instance classes a total fits when DATABASE_MAX_CONNECTIONS is unset', () => {
    const report = connectionsReport(lambdaConnections(service({ a: fn(70) })));

    expect(report).toContainEqual(expect.stringMatching(/^DATABASE_MAX_CONNECTIONS is unset/));
    expect(report).toContainEqual(expect.stringMatching(/^ {2}db\.t4g\.small +2 GiB +~193 +~173 +no$/));
    expect(report).toContainEqual(expect.stringMatching(/^ {2}db\.t4g\.medium +4 GiB +~414 +~394 +yes$/));
  });
});

describe("RDS's default max_connections", () => {
  it.each([
    // SHOW max_connections on instance classes of this memory with the default parameter group.
    [2, 198],
    [4, 413],
    [8, 856],
    [15.25, 1660],
  ])('with %s GiB is within 3 %% of the %s seen', (memoryGiB, seen) => {
    expect(Math.abs(rdsDefaultMaxConnections(memoryGiB) - seen) / seen).toBeLessThan(0.03);
  });

  it('leaves a db.t4g.medium about 395 usable, and stops at 5000', () => {
    expect(rdsUsableConnections(4)).toBeGreaterThanOrEqual(390);
    expect(rdsUsableConnections(4)).toBeLessThanOrEqual(400);
    expect(rdsDefaultMaxConnections(256)).toBe(5000);
  });
});

describe('the settings', () => {
  const complete = {
    DATABASE_URL: 'postgres://u:p@localhost:5432/db',
    AUTH_USER: 'admin',
    AUTH_PASS: 'secret',
    DBADMIN_SECRET: 's'.repeat(32),
  };

  it('give a Lambda container the per-container budget packaging counts', () => {
    const lambda = parseConfig({ ...complete, AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-dev-query' });

    expect(lambda.DB_PROCESS_CONNECTIONS).toBe(LAMBDA_PROCESS_CONNECTIONS);
    expect(parseConfig(complete).DB_PROCESS_CONNECTIONS).toBe(60);
  });

  it('read DATABASE_MAX_CONNECTIONS as an optional positive number', () => {
    expect(parseConfig(complete).DATABASE_MAX_CONNECTIONS).toBeUndefined();
    expect(parseConfig({ ...complete, DATABASE_MAX_CONNECTIONS: '395' }).DATABASE_MAX_CONNECTIONS).toBe(395);
    expect(() => parseConfig({ ...complete, DATABASE_MAX_CONNECTIONS: '0' })).toThrow(
      /DATABASE_MAX_CONNECTIONS/,
    );
  });
});

describe('the packaging plugin', () => {
  const packaging = (functions: LambdaService['functions'], environment: Record<string, unknown>) => {
    const printed: string[] = [];
    const serverless = { service: service(functions, environment), classes: { Error: ServerlessError } };
    const plugin = new LambdaConnectionsCheck(
      serverless,
      {},
      { log: { notice: (l: string) => printed.push(l) } },
    );
    return { plugin, printed };
  };

  it('checks after DBADMIN_RESERVED_CONCURRENCY is applied and before anything is bundled', () => {
    const plugins = readServiceConfig().plugins ?? [];

    expect(Object.keys(packaging({}, {}).plugin.hooks)).toEqual(['after:package:initialize']);
    expect(plugins.indexOf('./deploy/lambda-connections-plugin.cjs')).toBeGreaterThan(
      plugins.indexOf('./deploy/concurrency-plugin.cjs'),
    );
  });

  it('prints the table and lets packaging go on within the limit', () => {
    const { plugin, printed } = packaging({ a: fn(2) }, { DATABASE_MAX_CONNECTIONS: '10' });

    plugin.check(counting);

    expect(printed).toContain('8 of DATABASE_MAX_CONNECTIONS 10: 2 to spare');
  });

  it('stops packaging past the limit, with the table printed first', () => {
    const { plugin, printed } = packaging({ a: fn(3) }, { DATABASE_MAX_CONNECTIONS: '10' });

    expect(() => plugin.check(counting)).toThrow(ServerlessError);
    expect(() => plugin.check(counting)).toThrow(
      /^dbadmin: the functions may hold 12 database connections, more than DATABASE_MAX_CONNECTIONS 10/,
    );
    expect(printed).toContain('12 of DATABASE_MAX_CONNECTIONS 10: 2 too many');
  });

  it('stops packaging a database function with no reservedConcurrency', () => {
    const { plugin } = packaging({ a: fn() }, {});

    expect(() => plugin.check(counting)).toThrow(
      /^dbadmin: no reservedConcurrency, .*reach the database: a;/,
    );
  });
});

/**
 * Loads a function module as a cold start on Lambda would, with the database at a listener that
 * counts connections, and sends `paths` to it: how many connections it opened.
 */
async function connectionsOpened(handler: string, paths: string[]): Promise<number> {
  let opened = 0;
  const database: Server = createServer((socket) => {
    opened++;
    socket.destroy();
  });
  await new Promise<void>((listening) => database.listen(0, '127.0.0.1', listening));
  const { port } = database.address() as { port: number };
  const saved = { ...process.env };
  Object.assign(process.env, {
    AWS_LAMBDA_FUNCTION_NAME: handlerModule(handler),
    DATABASE_URL: `postgres://dbadmin:pw@127.0.0.1:${port}/dbadmin?sslmode=disable`,
  });
  let closePool: () => Promise<void> = async () => {};
  try {
    let module: { handler: Parameters<typeof call>[0] } | undefined;
    jest.isolateModules(() => {
      module = require(`../../${handlerModule(handler)}`);
      closePool = require('#lib/db/pool').closePool;
    });
    for (const path of paths) if (module) await call(module.handler, { path, auth: null });
    await new Promise((settled) => setTimeout(settled, 300));
    return opened;
  } finally {
    process.env = saved;
    await closePool().catch(() => undefined);
    await new Promise((closed) => database.close(closed));
  }
}

describe('functions listed as never reaching the database', () => {
  const config = readServiceConfig();
  const { lambdaConnections: listing } = config.custom as unknown as {
    lambdaConnections: { withoutDatabase: string[] };
  };
  const listed = listing.withoutDatabase;

  it.each(listed)('%s opens no connection, at cold start or serving its routes', async (name) => {
    const definition = config.functions[name];
    if (!definition) throw new Error(`no function ${name}`);
    const { routes } = require(`../../${handlerModule(definition.handler)}`) as {
      routes: { path: string }[];
    };
    const paths = routes.map((route) => route.path.replace(/\{[^}]+\}/g, 'x'));

    expect(await connectionsOpened(definition.handler, paths)).toBe(0);
  });

  it('would be caught opening one (the probe sees health reach the database)', async () => {
    expect(await connectionsOpened('functions/health.handler', ['/api/health'])).toBeGreaterThan(0);
  });
});
