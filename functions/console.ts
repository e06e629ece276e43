import { z } from 'zod';
import { consolePage } from '#lib/console/page';
import { NotFound } from '#lib/errors';
import { Asset } from '#lib/http/asset';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import bundle from '../console/dist/bundle.json';

/**
 * The web console: one page and its hashed assets, embedded at build time (bin/build-console).
 * It calls the public API only, from the same origin, with relative URLs and a hash router, so a
 * stage prefix (`/dev/`) works as well as `/`.
 */
const assets = new Map(
  Object.entries(bundle.assets as Record<string, { type: string; body: string }>).map(([name, file]) => [
    name,
    new Asset(file.body, file.type, 'immutable'),
  ]),
);

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/',
    summary: 'The web console',
    access: 'public',
    response: z.unknown(),
    handler: async () => {
      return consolePage(bundle);
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/assets/{file}',
    summary: 'A content-hashed file of the web console',
    access: 'public',
    params: z.object({ file: z.string() }),
    response: z.unknown(),
    handler: async ({ params }) => {
      const asset = assets.get(params.file);
      if (!asset) throw new NotFound('Not found', `no console file ${params.file}; reload the page`);
      return asset;
    },
  }),
];

export const handler = httpHandler(routes);
