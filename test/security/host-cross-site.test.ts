import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type BrowserContext, chromium } from 'playwright-core';
import { ConsoleHarness, describeInBrowser, findChromium } from '#test/support/browser';
import { ADMIN } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * Another site's page, opened by an admin whose browser holds dbadmin's credentials (the worst
 * case: Chromium sends them with every request to dbadmin), tries everything a page can: fetch
 * with credentials, a preflighted JSON POST, a no-cors POST of a type-less Blob, a form POST and a
 * navigation. Nothing changes, and nothing it can read says anything. Through `npm start`'s real
 * host, whose own CORS answers (serverless-offline's) are part of what is tested.
 */
jest.setTimeout(180_000);

const harness = new ConsoleHarness();
let attacker: Server;
let context: BrowserContext;
const victim = uniqueName('victim');

/** A page on another origin: 127.0.0.1 on another port (same site) or `localhost` (another site). */
const attackerOrigin = (site: 'same-site' | 'cross-site') =>
  `http://${site === 'same-site' ? '127.0.0.1' : 'localhost'}:${(attacker.address() as AddressInfo).port}`;

beforeAll(async () => {
  await harness.start();
  const created = await harness.api('POST', 'schema/create', {
    schemaName: victim,
    password: 'victim-pass-1',
  });
  expect(created.status).toBe(201);
  attacker = createServer((_, response) => {
    response.setHeader('content-type', 'text/html');
    response.end('<!doctype html><title>a page</title><form id="f" method="post"></form>');
  });
  await new Promise<void>((ready) => attacker.listen(0, '0.0.0.0', ready));
  const browser = await chromium.launch({ executablePath: findChromium(), args: ['--no-sandbox'] });
  context = await browser.newContext({
    httpCredentials: {
      username: ADMIN.user,
      password: ADMIN.pass,
      origin: harness.host.base,
      send: 'always',
    },
  });
});

afterAll(async () => {
  await context?.browser()?.close();
  attacker?.close();
  await harness.close();
});

/** What the page's scripts could learn: a body, or the error fetch threw. */
type Outcome = { status: number; body: string } | { failed: string };

async function fromPage(site: 'same-site' | 'cross-site', script: string): Promise<Outcome> {
  const page = await context.newPage();
  try {
    await page.goto(`${attackerOrigin(site)}/`);
    return await page.evaluate(`(async () => {
      try {
        const response = await (${script});
        return { status: response.status, body: await response.text() };
      } catch (error) {
        return { failed: String(error) };
      }
    })()`);
  } finally {
    await page.close();
  }
}

const keysOf = async () =>
  (await harness.api<{ keyName: string }[]>('GET', `project/${victim}/keys`)).body.map((k) => k.keyName);
const tableExists = async (table: string) =>
  (await harness.db.query('SELECT to_regclass($1) AS t', [`public.${table}`])).rows[0].t !== null;

describeInBrowser.each(['same-site', 'cross-site'] as const)(
  'a %s page, the admin’s credentials held',
  (site) => {
    const api = (path: string) => `${harness.host.base}/api/${path}`;

    it('reads no answer with credentials', async () => {
      const read = await fromPage(
        site,
        `fetch(${JSON.stringify(api('schemas'))}, { credentials: 'include' })`,
      );

      expect(read).toEqual({ failed: expect.stringMatching(/Failed to fetch/) });
    });

    it('creates no key with a preflighted JSON POST, and reads nothing back', async () => {
      const keyName = uniqueName('stolen');
      const posted = await fromPage(
        site,
        `fetch(${JSON.stringify(api(`project/${victim}/keys`))}, {
        method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ keyName: ${JSON.stringify(keyName)}, keyType: 'service_role' }),
      })`,
      );

      expect(posted).toEqual({ failed: expect.stringMatching(/Failed to fetch/) });
      expect(await keysOf()).not.toContain(keyName);
    });

    it('runs no SQL with a no-cors POST of a type-less Blob', async () => {
      const table = uniqueName('csrf_blob');
      await fromPage(
        site,
        `fetch(${JSON.stringify(api('query'))}, {
        method: 'POST', mode: 'no-cors', credentials: 'include',
        body: new Blob([JSON.stringify({ sql: 'create table public.${table}(id int)', runAs: 'admin' })]),
      })`,
      );

      expect(await tableExists(table)).toBe(false);
    });

    it('starts no trial, without credentials at all', async () => {
      await fromPage(
        site,
        `fetch(${JSON.stringify(api('trial/start'))}, {
        method: 'POST', mode: 'no-cors', credentials: 'omit',
        body: new Blob([JSON.stringify({ email: 'attacker@evil.example' })]),
      })`,
      );

      expect((await harness.api<{ status: string }>('GET', 'license/status')).body.status).toBe('none');
    });

    it('changes nothing with a form POST, and its navigation shows no answer worth having', async () => {
      const page = await context.newPage();
      try {
        await page.goto(`${attackerOrigin(site)}/`);
        await page.evaluate(`(() => {
        const form = document.getElementById('f');
        form.action = ${JSON.stringify(api(`project/${victim}/keys`))};
        form.enctype = 'text/plain';
        const field = document.createElement('input');
        field.name = '{"keyName":"formkey","keyType":"service_role","x":"';
        field.value = '"}';
        form.appendChild(field);
        form.submit();
      })()`);
        await page.waitForURL(/\/api\/project\//);
        expect(await page.textContent('body')).not.toMatch(/"key"/);
      } finally {
        await page.close();
      }
      expect(await keysOf()).not.toContain('formkey');
    });
  },
);

describe('the host’s answers to another origin', () => {
  const evil = 'http://evil.example';

  it('grants nothing on a preflight, and refuses it', async () => {
    const answer = await fetch(`${harness.host.base}/api/project/${victim}/keys`, {
      method: 'OPTIONS',
      headers: {
        origin: evil,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });

    expect([...answer.headers.keys()].filter((name) => name.startsWith('access-control-'))).toEqual([]);
    expect(answer.status).toBe(403);
  });

  it('grants nothing on a read', async () => {
    const answer = await fetch(`${harness.host.base}/api/schemas`, {
      headers: {
        origin: evil,
        authorization: `Basic ${Buffer.from(`${ADMIN.user}:${ADMIN.pass}`).toString('base64')}`,
      },
    });

    expect([...answer.headers.keys()].filter((name) => name.startsWith('access-control-'))).toEqual([]);
  });

  it('refuses a change sent without a content type, before any work', async () => {
    const table = uniqueName('csrf_typeless');
    const answer = await fetch(`${harness.host.base}/api/query`, {
      method: 'POST',
      headers: {
        origin: evil,
        authorization: `Basic ${Buffer.from(`${ADMIN.user}:${ADMIN.pass}`).toString('base64')}`,
      },
      body: new Blob([JSON.stringify({ sql: `create table public.${table}(id int)`, runAs: 'admin' })]),
    });

    expect(answer.status).toBe(403);
    expect(await answer.json()).toMatchObject({ error: 'Cross-site request refused' });
    expect(await tableExists(table)).toBe(false);
  });

  it('refuses a DNS-rebound page’s change: its own name as Host and Origin', async () => {
    const { port } = new URL(harness.host.base);
    const answer = await new Promise<{ status: number; body: string }>((done, fail) => {
      const sent = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/trial/start',
          headers: {
            host: `evil.test:${port}`,
            origin: `http://evil.test:${port}`,
            'content-type': 'application/json',
          },
        },
        (response) => {
          let body = '';
          response.on('data', (chunk: Buffer) => {
            body += chunk.toString();
          });
          response.on('end', () => done({ status: response.statusCode ?? 0, body }));
        },
      );
      sent.on('error', fail);
      sent.end(JSON.stringify({ email: 'rebound@evil.test' }));
    });

    expect(answer.status).toBe(403);
    expect((await harness.api<{ status: string }>('GET', 'license/status')).body.status).toBe('none');
  });

  it('asks a browser that opens an API URL for no Basic credentials, and still asks API clients', async () => {
    const browser = await fetch(`${harness.host.base}/api/schemas`, {
      headers: { 'sec-fetch-mode': 'navigate', 'sec-fetch-site': 'none', accept: 'text/html' },
    });
    const client = await fetch(`${harness.host.base}/api/schemas`);

    expect(browser.status).toBe(401);
    expect(browser.headers.get('www-authenticate')).toBeNull();
    expect(client.status).toBe(401);
    expect(client.headers.get('www-authenticate')).toMatch(/^Basic /);
  });
});
