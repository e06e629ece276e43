import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { handler as license } from '#functions/license';
import { handler as tables } from '#functions/tables';
import { loadConfig } from '#lib/config';
import { createLicensing, setLicensing } from '#lib/license/index';
import type { TrustedKey } from '#lib/license/lease';
import type { Licensing } from '#lib/license/licensing';
import { call } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { TestLicenseServer } from '#test/support/license-server';

/**
 * Licensing under test: the real license server over HTTPS, a database of its own, one clock for
 * the service, PostgreSQL and the license server that tests move by hand.
 */
export class LicensingHarness {
  readonly T0: Date;
  now: Date;
  readonly clock = () => this.now;
  readonly server: TestLicenseServer;
  dataDir = '';
  private database: Awaited<ReturnType<typeof licenseTestDatabase>> | undefined;

  constructor(T0 = new Date('2026-03-01T12:00:00Z')) {
    this.T0 = T0;
    this.now = T0;
    this.server = new TestLicenseServer({ clock: this.clock });
  }

  get db() {
    if (!this.database) throw new Error('LicensingHarness.start() first');
    return this.database.db;
  }

  async start(): Promise<void> {
    this.database = await licenseTestDatabase();
    await this.server.start();
  }

  async close(): Promise<void> {
    await this.server.close();
    setLicensing(undefined);
    await this.database?.drop();
  }

  /** Runs `work` with the license server down (refused connections), then starts it again. */
  async offline<T>(work: () => Promise<T>): Promise<T> {
    await this.server.stop();
    try {
      return await work();
    } finally {
      await this.server.start();
    }
  }

  /** Moves every clock to T0 + ms. */
  at(ms: number): Date {
    this.now = new Date(this.T0.getTime() + ms);
    return this.now;
  }

  /**
   * A deployment: by default a fresh one (new license-data directory and machine id, a database
   * with no trial or cache rows, the clock at T0); with `dir`, a restart of that one.
   */
  async deploy(
    options: {
      dir?: string;
      env?: Record<string, string>;
      trustedKeys?: readonly TrustedKey[];
      /** PostgreSQL's own clock instead of the test clock. */
      realDatabaseClock?: boolean;
    } = {},
  ): Promise<Licensing> {
    if (!options.dir) {
      this.now = this.T0;
      await this.database?.clear();
      this.dataDir = mkdtempSync(join(tmpdir(), 'dbadmin-license-'));
      writeFileSync(
        join(this.dataDir, 'machine-id.json'),
        JSON.stringify({ machineId: randomMachineId(), createdAt: this.T0.toISOString(), recovered: false }),
      );
    }
    const config = await loadConfig({
      ...process.env,
      LICENSE_SERVER_URL: this.server.url,
      LICENSE_SERVER_CA_FILE: this.server.tls.caFile,
      LICENSE_DATA_DIR: options.dir ?? this.dataDir,
      ...options.env,
    });
    const licensing = createLicensing(config, this.db, {
      clock: this.clock,
      ...(options.realDatabaseClock ? {} : { databaseClock: this.clock }),
      trustedKeys: options.trustedKeys ?? this.server.trustedKeys,
    });
    setLicensing(licensing);
    return licensing;
  }

  status = async () => (await call(license, { path: '/api/license/status', auth: null })).body;
  post = (path: string, body?: unknown) => call(license, { method: 'POST', path, body, auth: null });
  // As any client of an authenticated POST: with Content-Type: application/json, body or not.
  postAsAdmin = (path: string, body: unknown = {}) => call(license, { method: 'POST', path, body });
  gated = () => call(tables, { path: '/api/tables' });

  /** A fresh deployment with a newly issued paid license activated; answers the key. */
  async activated(options: { maxDeployments?: number } = {}): Promise<string> {
    await this.deploy();
    const key = await this.server.issue('owner@example.com', options);
    const reply = await this.post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    if (!reply.body.success) throw new Error(`activation failed: ${JSON.stringify(reply.body)}`);
    return key;
  }
}

export const randomMachineId = () =>
  Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
