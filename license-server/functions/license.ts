import type pg from 'pg';
import { z } from 'zod';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { signedLease, signingKey } from '#lib/license/lease';
import { logger } from '#lib/log';
import { serverClock } from '../lib/clock';
import { type LicenseServerConfig, loadLicenseServerConfig } from '../lib/config';
import { licenseCounters, licenseDatabase } from '../lib/db';
import { keyHash } from '../lib/keys';
import { RateLimiter } from '../lib/rate-limit';
import { activate, deactivate, type Signer, validate } from '../lib/store';

const licenseKey = z.string().trim().min(1, 'licenseKey is required').max(200);
const machineId = z.string().trim().min(1, 'machineId is required').max(128);
const email = z.string().trim().min(3, 'email is required').max(320);
/** The client's random challenge, echoed in the signed lease so an old answer cannot be replayed. */
const nonce = z.string().regex(/^[0-9a-f]{32}$/, 'nonce must be 32 lowercase hex characters');

interface Server {
  config: LicenseServerConfig;
  db: pg.Pool;
  signer: Signer;
  limits: { address: RateLimiter; key: RateLimiter };
}

let server: Promise<Server> | undefined;

/** Settings, database, signing key and the shared rate limits: once per container. */
function licenseServer(): Promise<Server> {
  server ??= (async () => {
    const config = await loadLicenseServerConfig();
    const db = await licenseDatabase(config);
    const signer = config.LICENSE_SERVER_SIGNING_KEY
      ? signingKey(config.LICENSE_SERVER_SIGNING_KEY)
      : undefined;
    if (!signer) logger.warn('LICENSE_SERVER_SIGNING_KEY is not set: answers are not signed');
    return {
      config,
      db,
      signer,
      limits: {
        address: new RateLimiter(licenseCounters(config), 'address', config.LICENSE_SERVER_RATE_PER_ADDRESS),
        key: new RateLimiter(licenseCounters(config), 'key', config.LICENSE_SERVER_RATE_PER_KEY),
      },
    };
  })().catch((error: unknown) => {
    server = undefined;
    throw error;
  });
  return server;
}

/** Tests: settings changed (signing key, limits); the next request reads them again. */
export function resetLicenseServer(): void {
  server = undefined;
}

/** A route's handler: rate limited per address and per key, then one store operation. */
const limited =
  <B extends { licenseKey: string }, R>(operation: (server: Server, body: B) => Promise<R>) =>
  async ({ body, clientAddress }: { body: B; clientAddress: string | undefined }) => {
    const running = await licenseServer();
    // Counted by the key's hash: the rate table must not hold keys the licenses table only hashes.
    await Promise.all([
      running.limits.address.take(clientAddress ?? 'unknown'),
      running.limits.key.take(keyHash(body.licenseKey)),
    ]);
    return operation(running, body);
  };

const clocked = ({ signer }: Server) => ({ now: serverClock.now(), signer });

const Outcome = z.object({ success: z.boolean(), message: z.string() });

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/license/validate',
    summary:
      'Is the key valid (and the email its owner), and does this machine hold a slot? Signed when asked with a nonce.',
    access: 'public',
    body: z.strictObject({
      licenseKey,
      machineId: machineId.optional(),
      email: email.optional(),
      nonce: nonce.optional(),
    }),
    response: z.object({
      valid: z.boolean(),
      activated: z.boolean().optional(),
      message: z.string(),
      type: z.enum(['trial', 'paid']).nullable(),
      expiresAt: z.string().nullable(),
      lease: signedLease.optional(),
    }),
    handler: limited((running, body) => validate(running.db, body, clocked(running))),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/activate',
    summary: 'Give this machine one of the license’s deployment slots',
    access: 'public',
    body: z.strictObject({ licenseKey, machineId, email, nonce: nonce.optional() }),
    response: Outcome.extend({
      released: z.array(z.string()).optional(),
      notice: z.string().optional(),
      lease: signedLease.optional(),
    }),
    handler: limited((running, body) =>
      activate(running.db, body, {
        ...clocked(running),
        staleAfterMs: running.config.LICENSE_SERVER_STALE_AFTER_HOURS * 3_600_000,
      }),
    ),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/deactivate',
    summary: 'Free this machine’s deployment slot',
    access: 'public',
    body: z.strictObject({ licenseKey, machineId, email }),
    response: Outcome,
    handler: limited((running, body) => deactivate(running.db, body)),
  }),
];

// The license server keeps no audit log of the service's kind: its store records what matters.
export const handler = httpHandler(routes, { audit: false });
