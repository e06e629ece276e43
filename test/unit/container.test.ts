import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

// No Docker engine runs where these tests run: check that both files say what we rely on.
const compose = parse(readFileSync('docker-compose.yml', 'utf8'));
const dockerfile = readFileSync('Dockerfile', 'utf8');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .filter((line) => line.trim() && !line.trim().startsWith('#'));

describe('docker-compose.yml', () => {
  it('runs PostgreSQL and the service, the service after the database is healthy', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['db', 'dbadmin']);
    expect(compose.services.db.image).toMatch(/^postgres:\d+/);
    expect(compose.services.dbadmin.depends_on.db.condition).toBe('service_healthy');
  });

  it('keeps license data on a named volume at /app/license-data', () => {
    expect(compose.services.dbadmin.volumes).toContain('license-data:/app/license-data');
    expect(compose.volumes).toHaveProperty('license-data');
  });

  it('points the service at the compose database and requires the secrets', () => {
    const env = compose.services.dbadmin.environment;
    expect(env.DATABASE_URL).toMatch(/@db:5432\//);
    expect(env.AUTH_PASS).toMatch(/:\?/);
  });

  it('connects as a role made by the init script that is not the superuser', () => {
    const url = compose.services.dbadmin.environment.DATABASE_URL;
    const init = readFileSync('deploy/postgres-init/10-dbadmin-role.sh', 'utf8');

    expect(url).toMatch(/^postgres:\/\/dbadmin:\$\{DBADMIN_DB_PASSWORD\}@db:5432\/dbadmin$/);
    expect(compose.services.db.volumes).toContain('./deploy/postgres-init:/docker-entrypoint-initdb.d:ro');
    expect(init).toMatch(/CREATE ROLE dbadmin LOGIN CREATEROLE NOSUPERUSER/);
    expect(init).toMatch(/CREATE DATABASE dbadmin OWNER dbadmin/);
  });
});

describe('Dockerfile', () => {
  it('builds on a Node 22 image and installs from the lock file without install scripts', () => {
    expect(instructions[0]).toMatch(/^FROM node:22/);
    expect(dockerfile).toMatch(/npm ci .*--ignore-scripts/);
  });

  it('serves on all interfaces on port 3000 with license data in /app/license-data', () => {
    expect(dockerfile).toMatch(/HOST=0\.0\.0\.0/);
    expect(instructions).toContain('EXPOSE 3000');
    expect(dockerfile).toMatch(/LICENSE_DATA_DIR=\/app\/license-data/);
  });

  it('runs as an unprivileged user and starts the service under serverless-offline', () => {
    expect(instructions).toContain('USER node');
    expect(instructions.at(-1)).toBe('CMD ["npm", "start"]');
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(pkg.scripts.start).toMatch(/bin\/start\.ts/);
  });
});
