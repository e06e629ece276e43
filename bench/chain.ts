import { z } from 'zod';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';

/**
 * Our whole Middy chain (request log, error mapper, router, Basic auth with its one read of the
 * shared sign-in failure counts, license gate, JSON response) with no work of its own.
 */
export const handler = httpHandler([
  defineRoute({
    method: 'GET',
    path: '/bench/chain',
    summary: 'benchmark only',
    access: 'admin',
    response: z.object({ ok: z.boolean() }),
    handler: async () => ({ ok: true }),
  }),
]);
