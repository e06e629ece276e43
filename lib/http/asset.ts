import { gzipSync } from 'node:zlib';
import type { HttpResponse } from '#lib/http/respond';

/**
 * A file of the web console as a route's result: the page itself (never cached, so a release is
 * picked up at once) or a content-hashed asset (cached for a year: its name changes with it).
 */
export class Asset {
  constructor(
    readonly body: string,
    readonly contentType: string,
    readonly caching: 'revalidate' | 'immutable',
    readonly headers: Record<string, string> = {},
  ) {}
}

const compressed = new WeakMap<Asset, string>();

/** Gzipped (base64, as API Gateway wants binary bodies) when the client accepts it. */
export function assetResponse(asset: Asset, acceptEncoding: string | undefined): HttpResponse {
  const headers: Record<string, string> = {
    'content-type': asset.contentType,
    'cache-control': asset.caching === 'immutable' ? 'public, max-age=31536000, immutable' : 'no-cache',
    'x-content-type-options': 'nosniff',
    vary: 'accept-encoding',
    ...asset.headers,
  };
  if (!/\bgzip\b/.test(acceptEncoding ?? '')) return { statusCode: 200, headers, body: asset.body };
  let body = compressed.get(asset);
  if (body === undefined) {
    body = gzipSync(asset.body, { level: 9 }).toString('base64');
    // The page carries a per-request nonce: only the shared assets are worth keeping.
    if (asset.caching === 'immutable') compressed.set(asset, body);
  }
  return {
    statusCode: 200,
    headers: { ...headers, 'content-encoding': 'gzip' },
    body,
    isBase64Encoded: true,
  };
}
