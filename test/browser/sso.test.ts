import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';
import { TestOidcProvider } from '#test/support/oidc-provider';
import { freePort } from '../../bin/free-port';

/**
 * Single sign-on in a real Chromium, through `npm start`'s host and a real OpenID provider
 * (oidc-provider over HTTPS): the sign-in page offers it, the provider's pages sign the person in,
 * the console opens with the role their group maps to, and signing out ends it.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();
const schema = uniqueName('sso_web');
let provider: TestOidcProvider;

describeInBrowser('single sign-on in the console', () => {
  beforeAll(async () => {
    const port = await freePort();
    const redirect = `http://127.0.0.1:${port}/api/sso/callback`;
    provider = await TestOidcProvider.start([redirect], {
      ana: { email: 'ana@example.com', email_verified: true, name: 'Ana Analyst', groups: ['support'] },
    });
    await h.start(provider.settings(redirect, { OIDC_ROLE_MAP: `support=analyst:${schema}` }), port);
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
    expect(
      (await h.api('POST', 'schema/create', { schemaName: schema, password: 'pw-0123456789' })).status,
    ).toBe(201);
  }, 180_000);
  afterAll(async () => {
    await h.close();
    await provider?.stop();
  });

  it('signs a person in at the provider, with the role their group maps to, and out again', async () => {
    // The provider's certificate is the test CA's, which the service trusts (OIDC_CA_FILE).
    const context = await h.browser.newContext({
      ignoreHTTPSErrors: true,
      viewport: { width: 1280, height: 760 },
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));

    await page.goto(`${h.host.base}/#/tenants`);
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.locator('input[name="login"]').fill('ana');
    await page.locator('input[name="password"]').fill('anything');
    await page.locator('button[type="submit"]').click();
    await page.getByRole('button', { name: 'Continue' }).click();

    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    expect(new URL(page.url()).hash).toBe('#/tenants');
    const who = await page.evaluate(async () => (await fetch('api/session')).json());
    expect(who).toMatchObject({
      kind: 'person',
      role: 'analyst',
      schemas: [schema],
      via: 'sso',
      person: { login: 'ana@example.com', name: 'Ana Analyst' },
    });
    await h.screenshot(page, 'sso');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).waitFor();
    expect(await page.evaluate(async () => (await fetch('api/session')).status)).toBe(401);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('says on the sign-in page why a sign-in was refused', async () => {
    const context = await h.browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    // Another browser's answer: the provider's redirect back, without this browser's attempt.
    await page.goto(`${h.host.base}/api/sso/callback?code=forged&state=forged`);
    await expectText(page.getByRole('alert'), 'started in another browser');
    expect(await page.evaluate(async () => (await fetch('api/session')).status)).toBe(401);
    expect(new URL(page.url()).search).toBe('');
    await context.close();
  });
});
