import { z } from 'zod';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';

/** Our whole Middy chain (error mapper, router, Basic auth, JSON response) with no database work. */
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
