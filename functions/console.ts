import { randomBytes } from 'node:crypto';
import { z } from 'zod';
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

/** Only this origin, no inline script; CodeMirror's injected styles carry the page's nonce. */
const policy = (nonce: string) =>
  [
    "default-src 'self'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');

function page(nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csp-nonce" content="${nonce}">
<title>dbadmin</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/${bundle.style}">
<script type="module" src="assets/${bundle.script}"></script>
</head>
<body><div id="app"></div><noscript>The dbadmin console needs JavaScript; the API is at api/openapi.json.</noscript></body>
</html>
`;
}

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/',
    summary: 'The web console',
    access: 'public',
    response: z.unknown(),
    handler: async () => {
      const nonce = randomBytes(16).toString('base64');
      return new Asset(page(nonce), 'text/html; charset=utf-8', 'revalidate', {
        'content-security-policy': policy(nonce),
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
      });
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
