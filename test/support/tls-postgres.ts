import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { TestTls } from './tls';

export interface TlsDatabase {
  /** The service role's URL, without TLS parameters: each test adds the ones it tries. */
  serviceUrl: string;
  stop: () => Promise<void>;
}

/** `url` with these query parameters set. */
export function withParams(url: string, params: Record<string, string>): string {
  const parsed = new URL(url);
  for (const [name, value] of Object.entries(params)) parsed.searchParams.set(name, value);
  return parsed.toString();
}

/**
 * A PostgreSQL of its own that requires TLS (ssl=on, hostssl lines only), with a certificate
 * `tls`'s CA signed for localhost and 127.0.0.1, and the service role provisioned as in
 * production. It runs in a child process (tls-postgres-server.ts); stop() ends it.
 */
export async function startTlsPostgres(tls: TestTls): Promise<TlsDatabase> {
  const child = spawn(process.execPath, [require.resolve('tsx/cli'), 'test/support/tls-postgres-server.ts'], {
    env: {
      ...process.env,
      DBADMIN_TLS_CERT: tls.cert,
      DBADMIN_TLS_KEY: tls.key,
      DBADMIN_TLS_CA_FILE: tls.caFile,
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout });
  const [first] = (await Promise.race([once(lines, 'line'), exited])) as [string | number | null];
  if (typeof first !== 'string' || !first.startsWith('{'))
    throw new Error(`the TLS PostgreSQL did not start (exit ${String(first)})`);
  const { serviceUrl } = JSON.parse(first) as { serviceUrl: string };
  return {
    serviceUrl,
    stop: async () => {
      child.stdin.end();
      await exited;
    },
  };
}
