import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'pg-connection-string';
import { parseConfig } from '#lib/config';
import { fromDatabaseError } from '#lib/db/pg-errors';
import { createPool } from '#lib/db/pool';

const complete = {
  DATABASE_URL: 'postgres://dbadmin:pass@db.example.com:5432/dbadmin',
  AUTH_USER: 'admin',
  AUTH_PASS: 'secret',
  DBADMIN_SECRET: 's'.repeat(32),
};
const onLambda = { ...complete, AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-prod-tables' };

/** A CA file pg can read (pg-connection-string reads sslrootcert when it parses the URL). */
const caFile = join(mkdtempSync(join(tmpdir(), 'dbadmin-tls-unit-')), 'ca.pem');
writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n');

const databaseUrl = (env: Record<string, string>) => parseConfig(env).DATABASE_URL;
const sslmode = (url: string) => new URL(url).searchParams.get('sslmode');

describe('TLS to the database', () => {
  it('verifies the certificate in full on Lambda when the URL does not say', () => {
    const url = databaseUrl(onLambda);

    expect(sslmode(url)).toBe('verify-full');
    expect(parse(url).ssl).toEqual({});
  });

  it('connects without TLS off Lambda when neither the URL nor PGSSLMODE asks for it', () => {
    const url = databaseUrl(complete);

    expect(sslmode(url)).toBe('disable');
    expect(parse(url).ssl).toBe(false);
  });

  it('honours sslmode=disable given explicitly, on Lambda too', () => {
    const url = databaseUrl({ ...onLambda, DATABASE_URL: `${complete.DATABASE_URL}?sslmode=disable` });

    expect(parse(url).ssl).toBe(false);
  });

  it('takes PGSSLMODE as the default, as libpq does', () => {
    expect(sslmode(databaseUrl({ ...complete, PGSSLMODE: 'verify-full' }))).toBe('verify-full');
    expect(sslmode(databaseUrl({ ...onLambda, PGSSLMODE: 'disable' }))).toBe('disable');
  });

  it('lets the URL’s sslmode win over PGSSLMODE', () => {
    const url = databaseUrl({
      ...complete,
      DATABASE_URL: `${complete.DATABASE_URL}?sslmode=verify-full`,
      PGSSLMODE: 'disable',
    });

    expect(sslmode(url)).toBe('verify-full');
  });

  it.each(['require', 'verify-ca'])('verifies the certificate and host name for sslmode=%s', (mode) => {
    const url = databaseUrl({ ...complete, DATABASE_URL: `${complete.DATABASE_URL}?sslmode=${mode}` });

    expect(sslmode(url)).toBe('verify-full');
    expect(parse(url).ssl).toEqual({});
  });

  it.each([
    [
      'sslmode=no-verify',
      /DATABASE_URL \(sslmode=no-verify is not supported: use verify-full \(TLS, certificate verified\) or disable\)/,
    ],
    ['sslmode=prefer', /DATABASE_URL \(sslmode=prefer is not supported: use verify-full/],
    ['sslmode=allow', /DATABASE_URL \(sslmode=allow is not supported: use verify-full/],
    ['sslmode=bogus', /DATABASE_URL \(sslmode=bogus is not supported: use verify-full/],
    ['ssl=no-verify', /DATABASE_URL \(ssl= is not supported: use sslmode=verify-full or sslmode=disable\)/],
    ['ssl=true', /DATABASE_URL \(ssl= is not supported/],
    ['uselibpqcompat=true&sslmode=require', /DATABASE_URL \(uselibpqcompat= is not supported/],
  ])('refuses %s, which could skip certificate verification', (query, message) => {
    expect(() => parseConfig({ ...onLambda, DATABASE_URL: `${complete.DATABASE_URL}?${query}` })).toThrow(
      message,
    );
  });

  it('refuses PGSSLMODE=no-verify', () => {
    expect(() => parseConfig({ ...complete, PGSSLMODE: 'no-verify' })).toThrow(
      /invalid settings: DATABASE_URL \(sslmode=no-verify is not supported: use verify-full/,
    );
  });

  it('never names the password when it refuses a URL', () => {
    const attempt = () =>
      parseConfig({ ...complete, DATABASE_URL: 'postgres://u:hunter2@db/x?sslmode=no-verify' });

    expect(attempt).toThrow(/DATABASE_URL/);
    expect(attempt).not.toThrow(/hunter2/);
  });

  it('keeps sslrootcert and the URL’s other parameters', () => {
    const url = databaseUrl({
      ...onLambda,
      DATABASE_URL: `${complete.DATABASE_URL}?sslrootcert=${encodeURIComponent(caFile)}&connect_timeout=3`,
    });

    expect(parse(url)).toMatchObject({ sslmode: 'verify-full', sslrootcert: caFile, connect_timeout: '3' });
  });

  it('gives the per-role pools the same TLS parameters, with their own login', async () => {
    const config = parseConfig({
      ...onLambda,
      DATABASE_URL: `${complete.DATABASE_URL}?sslmode=verify-full&sslrootcert=${encodeURIComponent(caFile)}`,
    });
    const pool = createPool(config, {
      applicationName: 'test',
      login: { user: 'shop_exec', password: 'p@ss word/#' },
    });

    const fields = parse(
      (pool as unknown as { options: { connectionString: string } }).options.connectionString,
    );
    await pool.end();

    expect(fields).toMatchObject({
      user: 'shop_exec',
      password: 'p@ss word/#',
      host: 'db.example.com',
      sslmode: 'verify-full',
      sslrootcert: caFile,
    });
    expect(fields.ssl).toMatchObject({ ca: expect.stringContaining('BEGIN CERTIFICATE') });
  });
});

describe('a TLS failure reaching the database', () => {
  it.each([
    [
      'an unknown CA',
      { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', message: 'unable to verify the first certificate' },
    ],
    [
      'a self-signed chain',
      { code: 'SELF_SIGNED_CERT_IN_CHAIN', message: 'self-signed certificate in chain' },
    ],
    ['an expired certificate', { code: 'CERT_HAS_EXPIRED', message: 'certificate has expired' }],
    [
      'another host’s certificate',
      { code: 'ERR_TLS_CERT_ALTNAME_INVALID', message: 'Hostname/IP does not match' },
    ],
    ['a server without TLS', { message: 'The server does not support SSL connections' }],
  ])('is a 503 that names TLS, for %s', (_, failure) => {
    const mapped = fromDatabaseError(Object.assign(new Error(failure.message), failure));

    expect(mapped).toMatchObject({
      status: 503,
      title: 'Database unavailable',
      message: 'no verified TLS connection to the database could be made; see the service log',
    });
  });
});
