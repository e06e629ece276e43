'use strict';
/**
 * Which other origins' pages may read the API's answers: none, unless CORS_ALLOWED_ORIGINS names
 * them (comma separated origins, never `*`; the service checks the list at start, lib/config).
 *
 * - On Lambda, API Gateway answers CORS: packaging sets the HTTP API's `cors` from the list (with
 *   credentials), and leaves it unset without one, so API Gateway grants no origin anything.
 * - Under serverless-offline (npm start, the container), the host answers every request that has
 *   an Origin with that origin in Access-Control-Allow-Origin, credentials allowed, and every
 *   preflight with 200 and whatever it asked for, whatever its CORS settings say. It has no switch
 *   for that, so this plugin, loaded before it, follows each of the host's `onPreResponse` steps
 *   with our own: every Access-Control-* header the host set goes; an origin on the list gets
 *   them back; a preflight from any other origin is refused with 403.
 *
 * Changes from other origins are refused by the functions themselves (lib/http/cross-site), on
 * every host alike; this decides only what a browser lets another origin's page read.
 */

const ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'x-requested-with',
  'idempotency-key',
  'x-csrf-token',
];
const ALLOWED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const EXPOSED_HEADERS = [
  'x-request-id',
  'x-license-status',
  'x-license-warning',
  'content-disposition',
  'retry-after',
];
const MAX_AGE_SECONDS = 600;

/** The list (lib/config checks it at the service's start); `*` and `null` never grant anything. */
const allowedOrigins = () =>
  (process.env.CORS_ALLOWED_ORIGINS ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry && entry !== '*' && entry !== 'null');

/**
 * The host's answer to `request`, made to grant what the allow-list grants and nothing else; for a
 * preflight from another origin, the refusal to answer instead.
 */
function applyPolicy(request) {
  const origin = request.headers.origin;
  const answer = request.response;
  if (!origin || !answer) return;
  const response = answer.isBoom ? answer.output : answer;
  for (const name of Object.keys(response.headers)) {
    if (name.toLowerCase().startsWith('access-control-')) delete response.headers[name];
  }
  const preflight =
    request.method === 'options' && request.headers['access-control-request-method'] !== undefined;
  if (allowedOrigins().includes(origin)) grant(answer, response, origin, preflight);
  else if (preflight) return refusal(origin);
  return undefined;
}

/** CORS headers for an origin on the list: a preflight answered 204, an answer made readable. */
function grant(answer, response, origin, preflight) {
  response.headers['access-control-allow-origin'] = origin;
  response.headers['access-control-allow-credentials'] = 'true';
  response.headers.vary = 'Origin';
  if (!preflight) {
    response.headers['access-control-expose-headers'] = EXPOSED_HEADERS.join(', ');
    return;
  }
  response.statusCode = 204;
  if (answer.isBoom) answer.output.payload = '';
  response.headers['access-control-allow-methods'] = ALLOWED_METHODS.join(', ');
  response.headers['access-control-allow-headers'] = ALLOWED_HEADERS.join(', ');
  response.headers['access-control-max-age'] = String(MAX_AGE_SECONDS);
}

/** A preflight from any other origin: 403 in the API's error format, granting nothing. */
const refusal = (origin) => ({
  error: 'Cross-origin request refused',
  message: `a page at ${String(origin).slice(0, 100)} may not call this API; name its origin in CORS_ALLOWED_ORIGINS to allow it`,
});

/** Follows `step` (one of the host's onPreResponse extensions) with applyPolicy. */
const followedByPolicy = (step) =>
  function policed(request, h) {
    const after = (result) => {
      const refused = applyPolicy(request);
      return refused ? h.response(refused).code(403) : result;
    };
    const result = step.call(this, request, h);
    return result && typeof result.then === 'function' ? result.then(after) : after(result);
  };

/**
 * serverless-offline imports hapi's `Server` when it starts serving, after plugins load: the
 * Server it gets makes servers whose onPreResponse extensions are each followed by the policy.
 */
function policeHapi() {
  let hapi;
  try {
    hapi = require(require.resolve('@hapi/hapi', { paths: [require.resolve('serverless-offline')] }));
  } catch {
    return false; // packaging on a machine without serverless-offline: nothing is served here
  }
  if (hapi.Server.policedByDbadmin) return true;
  const makeServer = hapi.Server;
  function Server(options) {
    const server = makeServer(options);
    const ext = server.ext.bind(server);
    server.ext = (event, method, options) =>
      event === 'onPreResponse' && typeof method === 'function'
        ? ext(event, followedByPolicy(method), options)
        : ext(event, method, options);
    return server;
  }
  Server.policedByDbadmin = true;
  hapi.Server = Server;
  hapi.server = Server;
  return true;
}

const policed = policeHapi();

class CorsPolicy {
  constructor(serverless) {
    this.serverless = serverless;
    this.hooks = {
      'before:package:initialize': () => this.configureApiGateway(allowedOrigins()),
      // Never serve without the policy: serverless-offline alone grants every origin everything.
      'before:offline:start': () => this.requirePolicy(),
      'before:offline:start:init': () => this.requirePolicy(),
    };
  }

  requirePolicy() {
    if (!policed)
      throw new this.serverless.classes.Error(
        "dbadmin: cannot apply the CORS policy to serverless-offline's server (@hapi/hapi not found beside it); refusing to serve",
      );
  }

  /** API Gateway's CORS for the HTTP API: the allow-list's origins, or nothing at all. */
  configureApiGateway(origins) {
    const provider = this.serverless.service.provider;
    if (origins.length === 0) {
      if (provider.httpApi) delete provider.httpApi.cors;
      return;
    }
    if (origins.includes('*'))
      throw new this.serverless.classes.Error(
        'CORS_ALLOWED_ORIGINS: name each origin; `*` would grant every page',
      );
    provider.httpApi = {
      ...provider.httpApi,
      cors: {
        allowedOrigins: origins,
        allowCredentials: true,
        allowedHeaders: ALLOWED_HEADERS,
        allowedMethods: ALLOWED_METHODS,
        exposedResponseHeaders: EXPOSED_HEADERS,
        maxAge: MAX_AGE_SECONDS,
      },
    };
  }
}

module.exports = CorsPolicy;
module.exports.applyPolicy = applyPolicy;
