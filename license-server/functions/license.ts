import type pg from 'pg';
import { z } from 'zod';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { parseLicenseServerConfig } from '../lib/config';
import { licenseDatabase } from '../lib/db';
import { RateLimiter } from '../lib/rate-limit';
import { activate, deactivate, validate } from '../lib/store';

const licenseKey = z.string().trim().min(1, 'licenseKey is required').max(200);
const machineId = z.string().trim().min(1, 'machineId is required').max(128);
const email = z.string().trim().min(3, 'email is required').max(320);

let limits: { address: RateLimiter; key: RateLimiter } | undefined;

/** Abuse control: per client address and per license key, 429 with Retry-After past the limit. */
function rateLimit(address: string | undefined, key: string): void {
  if (!limits) {
    const config = parseLicenseServerConfig(process.env);
    limits = {
      address: new RateLimiter(config.LICENSE_SERVER_RATE_PER_ADDRESS),
      key: new RateLimiter(config.LICENSE_SERVER_RATE_PER_KEY),
    };
  }
  limits.address.take(address ?? 'unknown');
  limits.key.take(key.toUpperCase());
}

const Outcome = z.object({ success: z.boolean(), message: z.string() });

/** A route's handler: rate limited, then one store operation on the server's database. */
const limited =
  <B extends { licenseKey: string }, R>(operation: (db: pg.Pool, body: B) => Promise<R>) =>
  async ({ body, clientAddress }: { body: B; clientAddress: string | undefined }) => {
    rateLimit(clientAddress, body.licenseKey);
    return operation(await licenseDatabase(), body);
  };

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/license/validate',
    summary: 'Is the key valid (and the email its owner), and does this machine hold a slot?',
    access: 'public',
    body: z.strictObject({ licenseKey, machineId: machineId.optional(), email: email.optional() }),
    response: z.object({
      valid: z.boolean(),
      activated: z.boolean().optional(),
      message: z.string(),
      type: z.enum(['trial', 'paid']).nullable(),
      expiresAt: z.string().nullable(),
    }),
    handler: limited(validate),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/activate',
    summary: 'Give this machine one of the license’s deployment slots',
    access: 'public',
    body: z.strictObject({ licenseKey, machineId, email }),
    response: Outcome,
    handler: limited(activate),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/deactivate',
    summary: 'Free this machine’s deployment slot',
    access: 'public',
    body: z.strictObject({ licenseKey, machineId, email }),
    response: Outcome,
    handler: limited(deactivate),
  }),
];

export const handler = httpHandler(routes);
