import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { SETTING_NAMES } from '#lib/config';
import { RESET_SESSION } from '#lib/db/pool';
import { hubProvisioning } from '#lib/db/role-admin';
import { envPairs, parseDockerfile } from '#test/support/dockerfile';
import { shippedSettings } from '#test/support/pgbouncer';
import { REVOKE_WAL_MESSAGES } from '../../bin/embedded-postgres';
import { AUTH_QUERY, PGBOUNCER_AUTH_USER, pgbouncerAuthProvisioning } from '../../bin/pgbouncer-auth';

// No Docker engine runs where these tests run: check that both files say what we rely on.
// test/e2e/container.test.ts builds and starts the image's file set with the Dockerfile's commands.
const compose = parse(readFileSync('docker-compose.yml', 'utf8'));
const service = compose.services.dbadmin;
const stages = parseDockerfile(readFileSync('Dockerfile', 'utf8'));
const final = stages.at(-1);
const instructions = (op: string) => final?.instructions.filter((i) => i.op === op) ?? [];
const imageEnv = Object.assign({}, ...instructions('ENV').map((i) => envPairs(i, { PATH: '$PATH' })));

describe('docker-compose.yml', () => {
  it('runs PostgreSQL and the service, the service after the database is healthy', () => {
    expect(compose.services.db.image).toMatch(/^postgres:\d+/);
    expect(compose.services.db.healthcheck.test.join(' ')).toMatch(/pg_isready/);
    expect(service.depends_on.db.condition).toBe('service_healthy');
  });

  it('runs the service under an init, so signals reach it and children are reaped', () => {
    expect(service.init).toBe(true);
  });

  it('keeps license data on a named volume at /app/license-data', () => {
    expect(service.volumes).toContain('license-data:/app/license-data');
    expect(compose.volumes).toHaveProperty('license-data');
  });

  it('connects as a role made by the init script that is not the superuser', () => {
    const init = readFileSync('deploy/postgres-init/10-dbadmin-role.sh', 'utf8');

    // PostgreSQL itself unless DBADMIN_DATABASE_ADDRESS names PgBouncer.
    expect(service.environment.DATABASE_URL).toMatch(
      /^postgres:\/\/dbadmin@\$\{DBADMIN_DATABASE_ADDRESS:-db:5432\}\/dbadmin$/,
    );
    expect(compose.services.db.volumes).toContain('./deploy/postgres-init:/docker-entrypoint-initdb.d:ro');
    expect(init).toMatch(/CREATE ROLE dbadmin LOGIN CREATEROLE NOSUPERUSER/);
    expect(init).toMatch(/CREATE DATABASE dbadmin OWNER dbadmin/);
    // psql's :'pw' quotes the password, whatever it holds.
    expect(init).toMatch(/PASSWORD :'pw'/);
    // The same revocation the embedded server gets (test/security/anon-leaves-nothing), in dbadmin's database.
    expect(init).toContain(`\\connect dbadmin\n${REVOKE_WAL_MESSAGES};`);
    // And the hub that makes tenants' roles, as the embedded server's provisioning makes it.
    expect(init).toContain(hubProvisioning('dbadmin'));
  });

  it('passes the database password apart from the URL, so any character works', () => {
    expect(service.environment.DATABASE_URL).not.toMatch(/PASSWORD|:[^/@]*@/);
    expect(service.environment.DATABASE_PASSWORD).toMatch(/^\$\{DBADMIN_DB_PASSWORD:\?/);
    expect(compose.services.db.environment.DBADMIN_DB_PASSWORD).toMatch(/^\$\{DBADMIN_DB_PASSWORD:\?/);
  });

  it('requires the secrets', () => {
    for (const name of ['AUTH_PASS', 'DBADMIN_SECRET']) expect(service.environment[name]).toMatch(/:\?/);
  });

  it('passes every setting the service reads through to it', () => {
    // Fixed by the image: production mode, and the volume's path.
    const fixed = new Set(Object.keys(imageEnv));
    const missing = SETTING_NAMES.filter((name) => !fixed.has(name) && !(name in service.environment));

    expect(missing).toEqual([]);
    for (const extra of ['LOG_LEVEL', 'NODE_EXTRA_CA_CERTS', 'LICENSE_SERVER_CA_FILE'])
      expect(service.environment).toHaveProperty(extra);
  });

  it('publishes plain HTTP on this host only unless told otherwise', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own interpolation, verbatim.
    expect(service.ports).toEqual(['${DBADMIN_BIND:-127.0.0.1}:${PORT:-3000}:3000']);
  });

  it('offers an HTTPS front by Caddy in the https profile', () => {
    const https = compose.services.https;
    const caddyfile = readFileSync('deploy/caddy/Caddyfile', 'utf8');

    expect(https.image).toMatch(/^caddy:2/);
    expect(https.profiles).toEqual(['https']);
    expect(https.volumes).toContain('./deploy/caddy/Caddyfile:/etc/caddy/Caddyfile:ro');
    expect(caddyfile).toMatch(/reverse_proxy dbadmin:3000/);
  });

  it('trusts X-Forwarded-For from the proxy’s fixed address only', () => {
    const address = compose.services.https.networks.default.ipv4_address;

    expect(service.environment.TRUSTED_PROXIES).toBe(`\${TRUSTED_PROXIES:-${address}}`);
    expect(compose.networks.default.ipam.config[0].subnet).toBe('172.31.250.0/24');
  });
});

describe('Dockerfile', () => {
  it('builds in one stage and runs from another, both on Node 22', () => {
    expect(stages.map((stage) => stage.from)).toEqual(['node:22-bookworm-slim', 'node:22-bookworm-slim']);
    expect(final?.instructions.filter((i) => i.op === 'COPY' && i.flags.from === 'build')).not.toHaveLength(
      0,
    );
  });

  it('installs production dependencies only, from the lock file, without install scripts', () => {
    const runs = instructions('RUN').map((i) => i.args[0]);

    expect(runs).toContainEqual(expect.stringMatching(/^npm ci --omit=dev --ignore-scripts/));
    expect(runs.join('\n')).not.toMatch(/npm run build|tsx|esbuild/);
  });

  it('serves on all interfaces on port 3000 in production mode with license data in /app/license-data', () => {
    expect(imageEnv).toMatchObject({
      NODE_ENV: 'production',
      HOST: '0.0.0.0',
      PORT: '3000',
      LICENSE_DATA_DIR: '/app/license-data',
    });
    expect(instructions('EXPOSE').map((i) => i.args[0])).toEqual(['3000']);
    expect(instructions('VOLUME').map((i) => i.args)).toEqual([['/app/license-data']]);
  });

  it('runs as an unprivileged user, node as the process, the prebuilt host, with a health check', () => {
    expect(instructions('USER').map((i) => i.args[0])).toEqual(['node']);
    expect(instructions('CMD').map((i) => i.args)).toEqual([
      ['node', '--max-old-space-size=384', 'dist/bin/start.js'],
    ]);
    expect(instructions('HEALTHCHECK')[0]?.args.join(' ')).toMatch(/\/api\/health/);
  });
});

describe('the pgbouncer profile', () => {
  const pgbouncer = compose.services.pgbouncer;
  const ini = shippedSettings();

  it("runs Debian's PgBouncer, the build the tests run, as an unprivileged user, with the password it needs", () => {
    const image = parseDockerfile(readFileSync('deploy/pgbouncer/Dockerfile', 'utf8')).at(-1);
    const ops = (op: string) => image?.instructions.filter((i) => i.op === op).flatMap((i) => i.args) ?? [];

    expect(pgbouncer.profiles).toEqual(['pgbouncer']);
    expect(pgbouncer.build).toBe('deploy/pgbouncer');
    expect(pgbouncer.depends_on.db.condition).toBe('service_healthy');
    expect(pgbouncer.environment.PGBOUNCER_AUTH_PASSWORD).toMatch(/^\$\{PGBOUNCER_AUTH_PASSWORD:\?/);
    expect(image?.from).toMatch(/^debian:bookworm/);
    expect(ops('RUN').join(' ')).toMatch(/apt-get install -y --no-install-recommends pgbouncer/);
    expect(ops('USER')).toEqual(['postgres']);
  });

  it('pools by transaction, resets every server connection as dbadmin does, and looks logins up safely', () => {
    expect(ini).toMatchObject({
      pool_mode: 'transaction',
      auth_type: 'scram-sha-256',
      auth_user: PGBOUNCER_AUTH_USER,
      auth_query: AUTH_QUERY,
      server_reset_query: RESET_SESSION,
      server_reset_query_always: '1',
      max_db_connections: '50',
    });
    // CVE-2025-12819: a client's search_path must never reach the auth query.
    expect(ini).not.toHaveProperty('track_extra_parameters');
    expect(ini).not.toHaveProperty('ignore_startup_parameters');
  });

  it("has its login and lookup function made on the volume's first start, as the tests make them", () => {
    const init = readFileSync('deploy/postgres-init/20-pgbouncer-auth.sh', 'utf8');

    expect(init).toContain(pgbouncerAuthProvisioning());
    expect(init).toMatch(/--dbname dbadmin/);
    expect(init).toMatch(/PASSWORD :'pw'/);
    expect(compose.services.db.environment.PGBOUNCER_AUTH_PASSWORD).toMatch(
      /^\$\{PGBOUNCER_AUTH_PASSWORD:-\}$/,
    );
  });
});
