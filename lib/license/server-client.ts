import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { rootCertificates } from 'node:tls';
import { z } from 'zod';

/** The license server could not be asked (network, TLS, timeout, or an answer we cannot read). */
export class LicenseServerUnreachable extends Error {
  constructor(cause: unknown) {
    super('Unable to connect to license server', { cause });
    this.name = 'LicenseServerUnreachable';
  }
}

/** The service is not set up to reach a license server at all. */
export class LicenseServerMisconfigured extends Error {
  override name = 'LicenseServerMisconfigured';
}

const validateAnswer = z.object({
  valid: z.boolean(),
  // Older servers send only `valid` (SPEC.md); the runtime check treats a missing one as true.
  activated: z.boolean().optional(),
  message: z.string().optional(),
  type: z.enum(['trial', 'paid']).nullable().optional(),
  // A date that is not one makes the answer unreadable (the server unreachable), never a crash later.
  expiresAt: z
    .string()
    .refine((text) => !Number.isNaN(Date.parse(text)), 'expected a date')
    .nullable()
    .optional(),
  /** Our server's signed lease; checked by the caller against the trusted keys, never trusted as is. */
  lease: z.unknown().optional(),
});
const activateAnswer = z.object({
  success: z.boolean(),
  message: z.string(),
  notice: z.string().optional(),
  lease: z.unknown().optional(),
});

export type ValidateAnswer = z.infer<typeof validateAnswer>;
export type ActivateAnswer = z.infer<typeof activateAnswer>;

export interface LicenseServerOptions {
  url: string | undefined;
  /** Extra CA, e.g. a private one (NODE_EXTRA_CA_CERTS works too, process-wide). */
  caFile?: string | undefined;
  timeoutMs?: number;
}

export interface LicenseServerClient {
  validate(body: {
    licenseKey: string;
    machineId?: string;
    email?: string;
    nonce?: string;
  }): Promise<ValidateAnswer>;
  activate(body: {
    licenseKey: string;
    machineId: string;
    email: string;
    nonce?: string;
  }): Promise<ActivateAnswer>;
  deactivate(body: { licenseKey: string; machineId: string; email: string }): Promise<ActivateAnswer>;
}

/** HTTPS only, certificates always verified: a license decision must come from the real server. */
export function licenseServerClient({
  url,
  caFile,
  timeoutMs = 10_000,
}: LicenseServerOptions): LicenseServerClient {
  if (!url) throw new LicenseServerMisconfigured('LICENSE_SERVER_URL not configured');
  const base = new URL(url);
  if (base.protocol !== 'https:') {
    throw new LicenseServerMisconfigured(
      `LICENSE_SERVER_URL must be an https:// URL, not ${base.protocol}//`,
    );
  }
  const ca = caFile ? [...rootCertificates, readFileSync(caFile, 'utf8')] : undefined;

  const post = <T>(path: string, body: unknown, schema: z.ZodType<T>) =>
    new Promise<T>((resolve, reject) => {
      const payload = JSON.stringify(body);
      const target = new URL(path.replace(/^\//, ''), base.href.endsWith('/') ? base.href : `${base.href}/`);
      const req = request(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        ca,
        timeout: timeoutMs,
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', (error) => reject(new LicenseServerUnreachable(error)));
      req.on('response', (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', (error) => reject(new LicenseServerUnreachable(error)));
        response.on('end', () => {
          try {
            const parsed = schema.safeParse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
            if (parsed.success) resolve(parsed.data);
            else
              reject(
                new LicenseServerUnreachable(new Error(`unexpected answer (HTTP ${response.statusCode})`)),
              );
          } catch (error) {
            reject(new LicenseServerUnreachable(error));
          }
        });
      });
      req.end(payload);
    });

  return {
    validate: (body) => post('api/license/validate', body, validateAnswer),
    activate: (body) => post('api/license/activate', body, activateAnswer),
    deactivate: (body) => post('api/license/deactivate', body, activateAnswer),
  };
}

/**
 * Calls `work` once for all callers that arrive while it runs: when many requests find the cache
 * stale together, one request goes to the license server.
 */
export function singleFlight<T>(work: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  return () => {
    running ??= work().finally(() => {
      running = undefined;
    });
    return running;
  };
}
