import { z } from 'zod';
import { Download } from '#lib/download';
import { httpHandler } from '#lib/http/handler';
import { processMetrics } from '#lib/http/metrics';
import { defineRoute } from '#lib/http/route';

/**
 * The service's figures for Prometheus (lib/http/metrics): the admin's Basic credentials, or
 * `Authorization: Bearer <METRICS_TOKEN>` so a scraper need not hold the admin's password. Served
 * whatever the license's state: the license state is one of the figures.
 */
export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/metrics',
    summary:
      'Prometheus metrics: requests by route and status, latency, pools and connections, license state and days left, audit write failures',
    access: 'metrics',
    ungated: true,
    response: z.string(),
    alsoProduces: 'text/plain',
    handler: async () => {
      const { text, contentType } = await processMetrics();
      return new Download(text, contentType, undefined);
    },
  }),
];

export const handler = httpHandler(routes);
