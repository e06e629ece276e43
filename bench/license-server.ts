/**
 * License server benchmark (npm run bench:license-server). Prints, next to a baseline measured in
 * the same run: validate req/s and p50/p99 with 10 connections over HTTPS (the real handler, store
 * and database behind an HTTPS listener) against a trivial handler on the same kind of listener;
 * and 10 machines racing for a license with 5 slots, many times: how many win each run.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { startTemporaryPostgres } from '../bin/embedded-postgres';
import { runTmpdir } from '../bin/run-tmpdir';
import { newSigningKey } from '../lib/license/lease';
import { logger } from '../lib/log';
import { handler } from '../license-server/functions/license';
import { closeLicenseDatabase, licenseDatabase } from '../license-server/lib/db';
import { activate, issueLicense } from '../license-server/lib/store';
import { httpEvent, lambdaContext } from '../test/support/http';
import { makeTestTls } from '../test/support/tls';
import { median, SECONDS } from './support';

// The handler runs in this process: one JSON line per request would bury the tables (the figures
// then leave out the cost of writing those lines).
logger.setLogLevel('WARN');

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RACES = Number(process.env.BENCH_RACES ?? 20);

type Answer = (
  path: string,
  body: string,
) => Promise<{ statusCode: number; headers: Record<string, string>; body: string }>;

async function listen(answer: Answer): Promise<{ url: string; close: () => void; ca: string }> {
  const tls = await makeTestTls();
  const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', async () => {
      const reply = await answer(req.url ?? '/', text);
      res.writeHead(reply.statusCode, reply.headers).end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://localhost:${(server.address() as AddressInfo).port}`,
    ca: tls.ca,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

async function load(url: string, body: string) {
  const result = await autocannon({
    url,
    connections: 10,
    duration: SECONDS,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

async function main() {
  const removeTmpdir = runTmpdir('dbadmin-bench-license');
  let stopDatabase: (() => Promise<void>) | undefined;
  if (!process.env.DATABASE_URL && !process.env.LICENSE_SERVER_DATABASE_URL) {
    const database = await startTemporaryPostgres('bench-license');
    process.env.LICENSE_SERVER_DATABASE_URL = database.url;
    stopDatabase = database.stop;
  }
  process.env.LICENSE_SERVER_DATABASE_URL ??= process.env.DATABASE_URL;
  // The benchmark is one client hammering one key: lift the abuse limits for it.
  process.env.LICENSE_SERVER_RATE_PER_ADDRESS = '100000000';
  process.env.LICENSE_SERVER_RATE_PER_KEY = '100000000';
  // Every answer is signed, as in production: the figure includes the Ed25519 signature.
  process.env.LICENSE_SERVER_SIGNING_KEY = newSigningKey().privateKey;
  // autocannon checks certificates against Node's trust store; the test CA is private.
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  try {
    const db = await licenseDatabase();
    const license = await issueLicense(db, {
      email: 'bench@example.com',
      type: 'paid',
      maxDeployments: 5,
      expiresAt: null,
    });
    const real = await listen(async (path, body) => {
      const event = httpEvent({
        method: 'POST',
        path,
        body,
        auth: null,
        headers: { 'content-type': 'application/json' },
      });
      return (await handler(event as never, lambdaContext(), {} as never)) as never;
    });
    const trivial = await listen(async () => ({
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: '{"valid":true}',
    }));
    const body = JSON.stringify({
      licenseKey: license.licenseKey,
      machineId: 'bench-machine',
      nonce: randomBytes(16).toString('hex'),
    });
    const samples = {
      trivial: [] as Awaited<ReturnType<typeof load>>[],
      validate: [] as Awaited<ReturnType<typeof load>>[],
    };
    await load(`${trivial.url}/api/license/validate`, body);
    await load(`${real.url}/api/license/validate`, body);
    for (let round = 0; round < ROUNDS; round++) {
      samples.trivial.push(await load(`${trivial.url}/api/license/validate`, body));
      samples.validate.push(await load(`${real.url}/api/license/validate`, body));
    }
    real.close();
    trivial.close();
    const row = (name: string, runs: Awaited<ReturnType<typeof load>>[], base: number) => ({
      target: name,
      'req/s': Math.round(median(runs.map((r) => r.rps))),
      'p50 ms': median(runs.map((r) => r.p50)),
      'p99 ms': median(runs.map((r) => r.p99)),
      'vs trivial': `${(median(runs.map((r) => r.rps)) / base).toFixed(2)}x`,
    });
    const base = median(samples.trivial.map((r) => r.rps));
    console.log(`\nPOST /api/license/validate over HTTPS, 10 connections, median of ${ROUNDS} x ${SECONDS}s`);
    console.table([
      row('trivial handler, same HTTPS listener', samples.trivial, base),
      row('license server validate', samples.validate, base),
    ]);

    const winners: number[] = [];
    for (let race = 0; race < RACES; race++) {
      const contested = await issueLicense(db, {
        email: 'race@example.com',
        type: 'paid',
        maxDeployments: 5,
        expiresAt: null,
      });
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          activate(
            db,
            {
              licenseKey: contested.licenseKey,
              machineId: `race-${race}-${i}`,
              email: 'race@example.com',
            },
            { now: new Date(), signer: undefined, staleAfterMs: 72 * 3_600_000 },
          ),
        ),
      );
      winners.push(results.filter((r) => r.success).length);
    }
    console.log(
      `10 machines racing for 5 slots, ${RACES} runs: winners per run ${[...new Set(winners)].join(', ')} (${winners.every((n) => n === 5) ? 'exactly 5 every run' : 'NOT 5 every run'})`,
    );
  } finally {
    await closeLicenseDatabase();
    await stopDatabase?.();
    removeTmpdir();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
