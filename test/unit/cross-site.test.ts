import { parseConfig } from '#lib/config';
import { crossSiteReason, fromBrowser } from '#lib/http/cross-site';

const CorsPolicy = require('../../deploy/cors-plugin.cjs') as {
  new (serverless: unknown): { configureApiGateway: (origins: string[]) => void };
  applyPolicy: (request: unknown) => unknown;
};
const { applyPolicy } = CorsPolicy;

const event = (
  method: string,
  headers: Record<string, string>,
  context: { sourceIp?: string; domainName?: string } = {},
) => ({
  requestContext: {
    http: { method, sourceIp: context.sourceIp ?? '192.0.2.10' },
    domainName: context.domainName,
  },
  headers: { host: 'dbadmin.example.com', ...headers },
});

describe('a change a browser sends from elsewhere', () => {
  it.each([
    ['another origin', { origin: 'https://evil.example' }],
    ['a sandboxed frame (Origin: null)', { origin: 'null' }],
    ['another site, by Sec-Fetch-Site', { 'sec-fetch-site': 'cross-site' }],
    ['a sibling subdomain, by Sec-Fetch-Site', { 'sec-fetch-site': 'same-site' }],
    ['the same host under another port', { origin: 'https://dbadmin.example.com:8443' }],
  ])('is refused from %s', (_, headers) => {
    expect(crossSiteReason(event('POST', headers), [])).toEqual(expect.any(String));
  });

  it.each(['DELETE', 'PATCH', 'PUT'])('is refused for %s as for POST', (method) => {
    expect(crossSiteReason(event(method, { origin: 'https://evil.example' }), [])).toEqual(
      expect.any(String),
    );
  });

  it.each([
    ['the console on localhost', { host: 'localhost:3000', origin: 'http://localhost:3000' }],
    ['the console on an address', { host: '10.0.0.5:3000', origin: 'http://10.0.0.5:3000' }],
    ['the console on an IPv6 address', { host: '[::1]:3000', origin: 'http://[::1]:3000' }],
    ['curl, which sends neither header', {}],
    ['Node’s fetch, which sends Sec-Fetch-Mode only', { 'sec-fetch-mode': 'cors' }],
    ['a typed URL, Sec-Fetch-Site none', { 'sec-fetch-site': 'none' }],
  ])('proceeds from %s', (_, headers) => {
    expect(crossSiteReason(event('POST', headers), [])).toBeUndefined();
  });

  it('is refused from a page whose DNS name was pointed at this machine (its name as Host and Origin)', () => {
    const rebound = event('POST', { host: 'evil.test:3000', origin: 'http://evil.test:3000' });

    expect(crossSiteReason(rebound, [])).toMatch(/CORS_ALLOWED_ORIGINS/);
  });

  describe('a domain name as Host', () => {
    afterEach(() => {
      delete process.env.TRUSTED_PROXIES;
      delete process.env.AWS_LAMBDA_FUNCTION_NAME;
    });
    const proxied = (origin: string) =>
      event('POST', { origin, 'x-forwarded-proto': 'https' }, { sourceIp: '172.31.250.250' });

    it('is own when a trusted proxy delivered the request, with the scheme it names', () => {
      process.env.TRUSTED_PROXIES = '172.31.250.250';

      expect(crossSiteReason(proxied('https://dbadmin.example.com'), [])).toBeUndefined();
      expect(crossSiteReason(proxied('http://dbadmin.example.com'), [])).toEqual(expect.any(String));
    });

    it('is not own when the proxy is not trusted', () => {
      expect(crossSiteReason(proxied('https://dbadmin.example.com'), [])).toEqual(expect.any(String));
    });

    it('is own when API Gateway delivered it for its own domain, over HTTPS', () => {
      process.env.AWS_LAMBDA_FUNCTION_NAME = 'dbadmin-dev-query';
      const gateway = (origin: string) => event('POST', { origin }, { domainName: 'dbadmin.example.com' });

      expect(crossSiteReason(gateway('https://dbadmin.example.com'), [])).toBeUndefined();
      expect(crossSiteReason(gateway('http://dbadmin.example.com'), [])).toEqual(expect.any(String));
    });

    it('is own when CORS_ALLOWED_ORIGINS names it', () => {
      const named = event('POST', { origin: 'https://dbadmin.example.com' });

      expect(crossSiteReason(named, ['https://dbadmin.example.com'])).toBeUndefined();
    });
  });

  it('proceeds from an origin CORS_ALLOWED_ORIGINS names, and only that one', () => {
    const allowed = ['https://front.example'];

    expect(
      crossSiteReason(
        event('POST', { origin: 'https://front.example', 'sec-fetch-site': 'cross-site' }),
        allowed,
      ),
    ).toBeUndefined();
    expect(crossSiteReason(event('POST', { origin: 'https://front.example.evil' }), allowed)).toEqual(
      expect.any(String),
    );
  });

  it('lets reads through: a browser keeps their answers from other origins', () => {
    expect(crossSiteReason(event('GET', { origin: 'https://evil.example' }), [])).toBeUndefined();
  });
});

describe('who is a browser, for the 401’s challenge', () => {
  it.each([
    [{ 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate' }, true],
    [{ 'upgrade-insecure-requests': '1' }, true],
    [{ accept: 'text/html,application/xhtml+xml' }, true],
    [{ 'sec-fetch-mode': 'cors', accept: '*/*' }, false],
    [{ accept: 'application/json' }, false],
  ])('%j -> %s', (headers, browser) => {
    expect(fromBrowser(event('GET', headers))).toBe(browser);
  });
});

describe('CORS_ALLOWED_ORIGINS', () => {
  const base = {
    DATABASE_URL: 'postgres://u:p@localhost/db',
    AUTH_USER: 'a',
    AUTH_PASS: 'b',
    DBADMIN_SECRET: 'x'.repeat(32),
  };

  it('takes a list of origins', () => {
    expect(
      parseConfig({ ...base, CORS_ALLOWED_ORIGINS: 'https://a.example, http://localhost:5173' })
        .CORS_ALLOWED_ORIGINS,
    ).toBe('https://a.example, http://localhost:5173');
  });

  it.each(['*', 'null', 'https://a.example/', 'https://a.example/app', 'a.example', 'ftp://a.example'])(
    'refuses %s, naming the setting',
    (entry) => {
      expect(() => parseConfig({ ...base, CORS_ALLOWED_ORIGINS: entry })).toThrow(/CORS_ALLOWED_ORIGINS/);
    },
  );
});

describe('the local host’s CORS answers (deploy/cors-plugin.cjs)', () => {
  const answered = (method: string, headers: Record<string, string>) => ({
    method,
    headers,
    response: {
      headers: {
        'access-control-allow-origin': headers.origin,
        'access-control-allow-credentials': 'true',
        'access-control-allow-methods': 'POST',
      } as Record<string, string>,
    },
  });

  afterEach(() => {
    delete process.env.CORS_ALLOWED_ORIGINS;
  });

  it('takes back every grant the host made to another origin, and refuses its preflight', () => {
    const read = answered('get', { origin: 'https://evil.example' });
    const preflight = answered('options', {
      origin: 'https://evil.example',
      'access-control-request-method': 'POST',
    });

    expect(applyPolicy(read)).toBeUndefined();
    expect(read.response.headers).toEqual({});
    expect(applyPolicy(preflight)).toMatchObject({ error: 'Cross-origin request refused' });
    expect(preflight.response.headers).toEqual({});
  });

  it('grants an origin on the list, with credentials, and no other', () => {
    process.env.CORS_ALLOWED_ORIGINS = 'https://front.example';
    const preflight = answered('options', {
      origin: 'https://front.example',
      'access-control-request-method': 'POST',
    });

    expect(applyPolicy(preflight)).toBeUndefined();
    expect(preflight.response.headers).toMatchObject({
      'access-control-allow-origin': 'https://front.example',
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': expect.stringContaining('POST'),
    });
  });
});

describe('API Gateway’s CORS, set when packaging', () => {
  const service = (httpApi?: Record<string, unknown>) => ({
    service: { provider: { httpApi } },
    classes: { Error },
  });

  it('is left unset without an allow-list: API Gateway grants no origin anything', () => {
    const serverless = service({ cors: true });

    new CorsPolicy(serverless).configureApiGateway([]);

    expect(serverless.service.provider.httpApi).toEqual({});
  });

  it('names exactly the listed origins, with credentials', () => {
    const serverless = service();

    new CorsPolicy(serverless).configureApiGateway(['https://front.example']);

    expect(serverless.service.provider.httpApi).toMatchObject({
      cors: { allowedOrigins: ['https://front.example'], allowCredentials: true },
    });
  });

  it('stops packaging on *', () => {
    expect(() => new CorsPolicy(service()).configureApiGateway(['*'])).toThrow(/name each origin/);
  });
});
