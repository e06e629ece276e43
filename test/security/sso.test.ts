import { handler as audit } from '#functions/audit';
import { handler as people } from '#functions/people';
import { seal, unseal } from '#lib/admin/sso';
import { closePool } from '#lib/db/pool';
import { tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { type Accounts, TestOidcProvider } from '#test/support/oidc-provider';
import { changingSettings } from '#test/support/settings';

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
  unsaid: { email: 'taken@example.test', groups: ['dbadmin-owners'] },
  posing: { preferred_username: 'taken@example.test', groups: ['dbadmin-owners'] },
  claimant: { email: 'taken@example.test', email_verified: true, groups: ['dbadmin-owners'] },
  kelvin: { preferred_username: '\u212Aate', groups: ['dbadmin-owners'] },
});

let provider: TestOidcProvider;
const settings = changingSettings();
const setSettings = settings.set;

beforeAll(async () => {
  await tenantSchema(scoped);
  provider = await TestOidcProvider.start([REDIRECT], accountsAt(['support']));
  setSettings(
    provider.settings(REDIRECT, { OIDC_ROLE_MAP: `dbadmin-owners=owner; support=analyst:${scoped}` }),
  );
}, 60_000);

afterAll(async () => {
  settings.restore();
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
  it('sends the browser to the provider with PKCE, state and nonce, sealed in this browser’s Lax cookie', async () => {
    const reply = await call(people, { path: '/api/sso/start', auth: null });

    expect(reply.status).toBe(303);
    const to = new URL(reply.headers.location ?? '');
    expect(to.origin).toBe(provider.issuer);
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    for (const name of ['code_challenge', 'state', 'nonce']) expect(to.searchParams.get(name)).toBeTruthy();
    expect(reply.headers['set-cookie']).toMatch(
      /^dbadmin_sso=[\w-]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600$/,
    );
    const sealed = (reply.headers['set-cookie'] ?? '').split(';')[0]?.split('=')[1];
    expect(sealed).not.toContain(to.searchParams.get('state'));
    expect(unseal(process.env.DBADMIN_SECRET as string, sealed)).toMatchObject({
      state: to.searchParams.get('state'),
      nonce: to.searchParams.get('nonce'),
    });
    const { rows } = await withAdminClient((c) =>
      c.query('SELECT count(*)::int AS n FROM _dbadmin.sso_used'),
    );
    await call(people, { path: '/api/sso/start', auth: null });
    const after = await withAdminClient((c) => c.query('SELECT count(*)::int AS n FROM _dbadmin.sso_used'));
    expect(after.rows[0].n).toBe(rows[0].n);
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

  it('never takes an unverified e-mail address, a username posing as one or a folded one for a login', async () => {
    for (const login of ['unverified', 'unsaid', 'posing', 'kelvin']) {
      const { query, cookie } = await answerFor(login);
      const reply = await callback(query, cookie);
      expect({ login, status: reply.status }).toEqual({ login, status: 403 });
    }
    const { rows } = await withAdminClient((c) =>
      c.query(
        `SELECT login FROM _dbadmin.people WHERE sso_subject IN ('unverified', 'unsaid', 'posing', 'kelvin') OR login = 'kate'`,
      ),
    );
    expect(rows).toEqual([]);
  });

  it('takes over no person who signs in with a password, even from a verified address', async () => {
    const added = await call(people, {
      method: 'POST',
      path: '/api/people',
      body: {
        login: 'taken@example.test',
        role: 'owner',
        schemas: null,
        password: 'correct horse battery staple',
      },
    });
    expect(added.status).toBe(201);
    const { query, cookie } = await answerFor('claimant');
    const reply = await callback(query, cookie);
    expect(reply.status).toBe(409);
    expect(reply.body.message).toMatch(/signs in with a password/);
    const { rows } = await withAdminClient((c) =>
      c.query(`SELECT sso_subject FROM _dbadmin.people WHERE login = 'taken@example.test'`),
    );
    expect(rows).toEqual([{ sso_subject: null }]);
  });

  it('ends everything a person whose groups no longer give a role signs in with, and says so in the audit log', async () => {
    const { session, who } = await signedInAs('ana');
    const id = who.body.person.id as number;
    await withAdminClient((c) =>
      c.query(`UPDATE _dbadmin.people SET password_hash = 'scrypt$kept' WHERE id = $1`, [id]),
    );
    provider.setAccounts(accountsAt(['moved-on']));
    try {
      const { query, cookie } = await answerFor('ana');
      const reply = await callback(query, cookie);
      expect(reply.status).toBe(403);
      const before = await call(people, { path: '/api/session', auth: null, headers: { cookie: session } });
      expect(before.status).toBe(401);
      const { rows } = await withAdminClient((c) =>
        c.query('SELECT password_hash FROM _dbadmin.people WHERE id = $1', [id]),
      );
      expect(rows).toEqual([{ password_hash: null }]);
      const entries = await call(audit, {
        path: '/api/audit',
        query: { action: 'person.revoke', limit: '1' },
      });
      expect(entries.body.entries[0]).toMatchObject({ target: 'ana@example.test', status: 403 });
    } finally {
      provider.setAccounts(accountsAt(['support']));
    }
  });

  it('keeps a person whose provider sent no groups claim at all, refusing only the sign-in', async () => {
    const { session } = await signedInAs('ana');
    const accounts = accountsAt(['support']);
    delete accounts.ana?.groups;
    provider.setAccounts(accounts);
    try {
      const { query, cookie } = await answerFor('ana');
      const reply = await callback(query, cookie);
      expect(reply.status).toBe(403);
      expect(reply.body.message).toMatch(/no groups claim/);
      const still = await call(people, { path: '/api/session', auth: null, headers: { cookie: session } });
      expect(still.status).toBe(200);
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
    const secret = process.env.DBADMIN_SECRET as string;
    const attempt = unseal(secret, cookie.split('=')[1]);
    if (!attempt) throw new Error('the attempt does not unseal');
    const forged = `dbadmin_sso=${seal(secret, { ...attempt, nonce: 'not-the-one-sent' })}`;
    const reply = await callback(query, forged);
    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/nonce/);
    noSession(reply);
  });

  it('refuses an attempt this service did not seal', async () => {
    const { query, cookie } = await answerFor('olga');
    const value = cookie.split('=')[1] as string;
    const flipped = `${value.slice(0, 20)}${value[20] === 'A' ? 'B' : 'A'}${value.slice(21)}`;
    const reply = await callback(query, `dbadmin_sso=${flipped}`);
    expect(reply.status).toBe(400);
    noSession(reply);
  });

  it('refuses an answer that names another issuer', async () => {
    const { query, cookie } = await answerFor('olga');
    const reply = await callback({ ...query, iss: 'https://idp.evil.example' }, cookie);
    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/iss/);
    noSession(reply);
  });

  it('sends a browser back to the sign-in page with why (a code, no text of the request’s), and writes nothing', async () => {
    const { query } = await answerFor('olga');
    const reply = await callback({ ...query, note: 'call 555-0100' }, undefined, {
      accept: 'text/html,application/xhtml+xml',
    });
    expect(reply.status).toBe(303);
    expect(reply.headers.location).toBe('/?sso_error=refused#/');
    noSession(reply);
    const { rows } = await withAdminClient((c) =>
      c.query('SELECT count(*)::int AS n FROM _dbadmin.audit_log WHERE request_id = $1', [
        reply.headers['x-request-id'],
      ]),
    );
    expect(rows[0].n).toBe(0);
  });

  it('answers 502 when the provider refuses dbadmin itself (a wrong client secret), charging no one', async () => {
    const { query, cookie } = await answerFor('olga');
    setSettings({ OIDC_CLIENT_SECRET: 'not-the-secret' });
    try {
      const reply = await callback(query, cookie);
      expect(reply.status).toBe(502);
      expect(reply.body.message).not.toMatch(/invalid_client/);
    } finally {
      setSettings({ OIDC_CLIENT_SECRET: provider.clientSecret });
    }
  });

  it('answers 429 to an address whose answers keep being refused', async () => {
    const sourceIp = '100.64.41.7';
    const statuses: number[] = [];
    setSettings({ AUTH_MAX_FAILURES: '10' });
    try {
      for (let i = 0; i < 12; i++) {
        const query = { state: 'x', code: 'y' };
        statuses.push(
          (await call(people, { path: '/api/sso/callback', auth: null, sourceIp, query })).status,
        );
      }
    } finally {
      setSettings({ AUTH_MAX_FAILURES: '100000' });
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(400));
    expect(statuses.slice(10)).toEqual([429, 429]);
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
