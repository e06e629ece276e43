import { connectionString, publicAddress } from '#lib/admin/connection-string';
import { parseConfig } from '#lib/config';

const settings = {
  DATABASE_URL: 'postgres://dbadmin:service-secret@10.0.0.7:6543/app',
  AUTH_USER: 'admin',
  AUTH_PASS: 'secret',
  DBADMIN_SECRET: 's'.repeat(32),
};
const login = { user: 'shop_user', database: 'app' };
const addressOf = (env: Record<string, string>) => publicAddress(parseConfig({ ...settings, ...env }));

describe('a schema’s connection string', () => {
  it('names the server, port and database the service uses, never its login or password', () => {
    const answer = connectionString(addressOf({}), login);

    expect(answer).toEqual({
      host: '10.0.0.7',
      port: 6543,
      database: 'app',
      user: 'shop_user',
      psql: "psql 'postgresql://shop_user@10.0.0.7:6543/app'",
      url: 'postgresql://shop_user:<password>@10.0.0.7:6543/app',
    });
    expect(JSON.stringify(answer)).not.toMatch(/dbadmin|service-secret/);
  });

  it('names the host and port people use when PUBLIC_DATABASE_HOST and PUBLIC_DATABASE_PORT say', () => {
    const answer = connectionString(
      addressOf({ PUBLIC_DATABASE_HOST: 'db.example.com', PUBLIC_DATABASE_PORT: '5432' }),
      login,
    );

    expect(answer.psql).toBe("psql 'postgresql://shop_user@db.example.com:5432/app'");
    expect(answer.url).toBe('postgresql://shop_user:<password>@db.example.com:5432/app');
  });

  it('carries sslmode=verify-full when the service’s connection uses TLS', () => {
    const answer = connectionString(
      addressOf({ DATABASE_URL: `${settings.DATABASE_URL}?sslmode=require&sslrootcert=/etc/ca.pem` }),
      login,
    );

    expect(answer.sslmode).toBe('verify-full');
    // The CA file's path is the service's own, not the person's: left out.
    expect(answer.url).toBe('postgresql://shop_user:<password>@10.0.0.7:6543/app?sslmode=verify-full');
    expect(connectionString(addressOf({}), login).sslmode).toBeUndefined();
  });

  it('brackets an IPv6 address and defaults the port as pg does', () => {
    const answer = connectionString(addressOf({ DATABASE_URL: 'postgres://u:p@[::1]/app' }), login);

    expect(answer).toMatchObject({ host: '::1', port: 5432 });
    expect(answer.url).toBe('postgresql://shop_user:<password>@[::1]:5432/app');
  });

  it('names the database the service is in when DATABASE_URL names none', () => {
    const answer = connectionString(addressOf({ DATABASE_URL: 'postgres://u:p@localhost:5432' }), {
      user: 'shop_user',
      database: 'u',
    });

    expect(answer.url).toBe('postgresql://shop_user:<password>@localhost:5432/u');
  });

  it('encodes the database name so the command stays one shell word', () => {
    const answer = connectionString(
      addressOf({ DATABASE_URL: "postgres://u:p@localhost:5432/it's%20db" }),
      login,
    );

    expect(answer.database).toBe("it's db");
    expect(answer.psql).toBe("psql 'postgresql://shop_user@localhost:5432/it%27s%20db'");
  });

  it('keeps a socket directory in the query, as libpq reads it', () => {
    const answer = connectionString(
      addressOf({ DATABASE_URL: 'postgres:///app?host=/var/run/postgresql' }),
      login,
    );

    expect(answer.url).toBe('postgresql://shop_user:<password>@:5432/app?host=%2Fvar%2Frun%2Fpostgresql');
  });

  it.each([
    ['PUBLIC_DATABASE_HOST', 'db.example.com/evil'],
    ['PUBLIC_DATABASE_HOST', "db' -c 'drop"],
    ['PUBLIC_DATABASE_PORT', '70000'],
    ['PUBLIC_DATABASE_PORT', 'five'],
  ])('refuses %s=%j at start', (name, value) => {
    expect(() => parseConfig({ ...settings, [name]: value })).toThrow(
      new RegExp(`invalid settings: ${name}`),
    );
  });
});
