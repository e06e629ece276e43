import { handler as audit } from '#functions/audit';
import { handler as people } from '#functions/people';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { type Accounts, TestOidcProvider } from '#test/support/oidc-provider';

/**
 * Single sign-on against a real OpenID provider (oidc-provider over HTTPS). The attacker forges
 * or replays the provider's answer at the callback: another browser's attempt (login CSRF), a
 * state, nonce or issuer of their making, a code from another attempt, the same answer twice. And
 * a person the provider no longer puts in a mapped group keeps nothing.
 */

const REDIRECT = 'http://localhost:3000/api/sso/callback';
const scoped = uniqueName('sso_scope');
const accountsAt = (supportGroups: string[]): Accounts => ({
  olga: { email: 'olga@example.test', email_verified: true, name: 'Olga Owner', groups: ['dbadmin-owners'] },
  ana: { email: 'ana@example.test', email_verified: true, name: 'Ana Analyst', groups: supportGroups },
  nobody: { email: 'nobody@example.test', email_verified: true, groups: ['elsewhere'] },
  unverified: { email: 'olga@example.test', email_verified: false, preferred_username: 'olga-look-alike' },
});

let provider: TestOidcProvider;
const saved: Record<string, string | undefined> = {};

function setSettings(settings: Record<string, string>): void {
  for (const [name, value] of Object.entries(settings)) {
    if (!(name in saved)) saved[name] = process.env[name];
    process.env[name] = value;
  }
  resetConfig();
}

beforeAll(async () => {
  await tenantSchema(scoped);
  provider = await TestOidcProvider.start([REDIRECT], accountsAt(['support']));
  setSettings(
    provider.settings(REDIRECT, { OIDC_ROLE_MAP: `dbadmin-owners=owner; support=analyst:${scoped}` }),
  );
}, 60_000);

afterAll(async () => {
  for (const [name, value] of Object.entries(saved))
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  resetConfig();
  await provider?.stop();
  await closePool();
});

interface Started {
  location: string;
  cookie: string;
}

async function start(query: Record<string, string> = {}): Promise<Started> {
  const reply = await call(people, { path: '/api/sso/start', auth: null, query });
  if (reply.status !== 303) throw new Error(`start: ${reply.status} ${reply.text}`);
  return {
    location: reply.headers.location ?? '',
    cookie: (reply.headers['set-cookie'] ?? '').split(';')[0] ?? '',
  };
}

/** The provider's answer for `login`, and the cookie of the browser that started the attempt. */
async function answerFor(login: string): Promise<{ query: Record<string, string>; cookie: string }> {
  const started = await start();
  const back = await provider.signIn(started.location, login);
  expect(back.href.startsWith(REDIRECT)).toBe(true);
  return { query: Object.fromEntries(back.searchParams), cookie: started.cookie };
}

const callback = (query: Record<string, string>, cookie?: string, headers: Record<string, string> = {}) =>
  call(people, {
    path: '/api/sso/callback',
    auth: null,
    query,
    headers: { ...(cookie ? { cookie } : {}), ...headers },
  });

const sessionOf = (reply: Reply) => (reply.headers['set-cookie'] ?? '').split(';')[0] ?? '';

async function signedInAs(login: string) {
  const { query, cookie } = await answerFor(login);
  const reply = await callback(query, cookie);
  expect({ status: reply.status, body: reply.text }).toMatchObject({ status: 303 });
  const session = sessionOf(reply);
  const who = await call(people, { path: '/api/session', auth: null, headers: { cookie: session } });
  return { reply, session, who };
}

describe('single sign-on', () => {
  it('sends the browser to the provider with PKCE, state and nonce, bound to this browser by a Lax cookie', async () => {
    const reply = await call(people, { path: '/api/sso/start', auth: null });

    expect(reply.status).toBe(303);
    const to = new URL(reply.headers.location ?? '');
    expect(to.origin).toBe(provider.issuer);
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    for (const name of ['code_challenge', 'state', 'nonce']) expect(to.searchParams.get(name)).toBeTruthy();
    expect(reply.headers['set-cookie']).toMatch(
      new RegExp(
        `^dbadmin_sso=${to.searchParams.get('state')}; Path=/api/sso/callback; HttpOnly; SameSite=Lax`,
      ),
    );
  });

  it('signs in a person whose group is mapped, with that role and scope, and audits it as SSO', async () => {
    const { reply, who } = await signedInAs('ana');

    expect(reply.headers.location).toBe('/#/');
    expect(reply.headers['set-cookie']).toMatch(/^dbadmin_session=dbs_.*HttpOnly; SameSite=Strict/);
    expect(who.body).toMatchObject({
      kind: 'person',
      role: 'analyst',
      schemas: [scoped],
      via: 'sso',
      person: { login: 'ana@example.test', name: 'Ana Analyst', signsInWith: ['sso'] },
    });
    const entries = await call(audit, { path: '/api/audit', query: { action: 'session.start', limit: '5' } });
    expect(entries.body.entries[0]).toMatchObject({ via: 'sso', personLogin: 'ana@example.test' });
  });

  it('lands on the console page the sign-in started from, and only on a console page', async () => {
    const started = await start({ returnTo: '#/tenants' });
    const back = await provider.signIn(started.location, 'olga');
    const reply = await callback(Object.fromEntries(back.searchParams), started.cookie);
    expect(reply.headers.location).toBe('/#/tenants');

    for (const returnTo of ['https://evil.example/', '//evil.example', '/#/x', 'javascript:alert(1)']) {
      const refused = await call(people, { path: '/api/sso/start', auth: null, query: { returnTo } });
      expect({ returnTo, status: refused.status }).toEqual({ returnTo, status: 400 });
    }
  });

  it('refuses a person no mapped group names until an owner adds them, then gives the owner’s role', async () => {
    const first = await answerFor('nobody');
    const refused = await callback(first.query, first.cookie);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/OIDC_ROLE_MAP.*ask an owner/);
    expect(refused.headers['set-cookie']).toBeUndefined();

    const added = await call(people, {
      method: 'POST',
      path: '/api/people',
      body: { login: 'nobody@example.test', role: 'developer', schemas: null },
    });
    expect(added.status).toBe(201);
    const { who } = await signedInAs('nobody');
    expect(who.body).toMatchObject({ role: 'developer', via: 'sso', person: { signsInWith: ['sso'] } });
  });

  it('never takes an unverified e-mail address as a login', async () => {
    const { query, cookie } = await answerFor('unverified');
    const reply = await callback(query, cookie);
    expect(reply.status).toBe(403);
    const { rows } = await withAdminClient((c) =>
      c.query(`SELECT login FROM _dbadmin.people WHERE sso_subject = 'unverified'`),
    );
    expect(rows).toEqual([]);
  });

  it('ends the sessions of a person whose groups no longer give a role, and refuses them', async () => {
    const { session } = await signedInAs('ana');
    provider.setAccounts(accountsAt(['moved-on']));
    try {
      const { query, cookie } = await answerFor('ana');
      const reply = await callback(query, cookie);
      expect(reply.status).toBe(403);
      const before = await call(people, { path: '/api/session', auth: null, headers: { cookie: session } });
      expect(before.status).toBe(401);
    } finally {
      provider.setAccounts(accountsAt(['support']));
    }
  });
});

describe('a forged or replayed answer at the callback', () => {
  const noSession = (reply: Reply) => expect(reply.headers['set-cookie']).toBeUndefined();

  it('refuses an answer the browser did not ask for (no attempt cookie: login CSRF)', async () => {
    const { query } = await answerFor('olga');
    const reply = await callback(query);
    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/did not start this sign-in/);
    noSession(reply);
  });

  it('refuses a state that is not the attempt’s', async () => {
    const { query, cookie } = await answerFor('olga');
    const reply = await callback({ ...query, state: `${query.state}x` }, cookie);
    expect(reply.status).toBe(400);
    noSession(reply);
  });

  it('refuses the same answer twice', async () => {
    const { query, cookie } = await answerFor('olga');
    expect((await callback(query, cookie)).status).toBe(303);
    const again = await callback(query, cookie);
    expect(again.status).toBe(400);
    expect(again.body.message).toMatch(/used already/);
    noSession(again);
  });

  it('refuses a code from another attempt (PKCE)', async () => {
    const mine = await answerFor('olga');
    const theirs = await answerFor('olga');
    const reply = await callback({ ...mine.query, code: theirs.query.code as string }, mine.cookie);
    expect(reply.status).toBe(400);
    noSession(reply);
  });

  it('refuses an ID token whose nonce is not the attempt’s', async () => {
    const { query, cookie } = await answerFor('olga');
    await withAdminClient((c) => c.query(`UPDATE _dbadmin.sso_attempts SET nonce = 'not-the-one-sent'`));
    const reply = await callback(query, cookie);
    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/nonce/);
    noSession(reply);
  });

  it('refuses an answer that names another issuer', async () => {
    const { query, cookie } = await answerFor('olga');
    const reply = await callback({ ...query, iss: 'https://idp.evil.example' }, cookie);
    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/iss/);
    noSession(reply);
  });

  it('sends a browser back to the sign-in page with why, and no session', async () => {
    const { query } = await answerFor('olga');
    const reply = await callback(query, undefined, { accept: 'text/html,application/xhtml+xml' });
    expect(reply.status).toBe(303);
    expect(reply.headers.location).toMatch(/^\/\?sso_error=.*did%20not%20start/);
    noSession(reply);
  });
});

describe('SSO_ONLY', () => {
  beforeAll(() => setSettings({ SSO_ONLY: 'true' }));
  afterAll(() => setSettings({ SSO_ONLY: 'false' }));

  it('refuses a person’s password, and still takes AUTH_USER’s', async () => {
    const login = uniqueName('pw');
    await call(people, {
      method: 'POST',
      path: '/api/people',
      body: { login, role: 'analyst', schemas: null, password: 'correct horse battery staple' },
    });
    const person = await call(people, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      body: { login, password: 'correct horse battery staple' },
    });
    expect(person.status).toBe(403);
    expect(person.body.message).toMatch(/single sign-on/);
    const admin = await call(people, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      body: { login: process.env.AUTH_USER, password: process.env.AUTH_PASS },
    });
    expect(admin.status).toBe(200);
  });
});
