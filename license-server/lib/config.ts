import { z } from 'zod';
import { ConfigError } from '#lib/errors';

const settings = z.object({
  LICENSE_SERVER_DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL'),
  LICENSE_SERVER_DB_POOL_MAX: z.coerce.number().int().positive().default(5),
  /** Requests per minute per client address, and per license key, for validate/activate/deactivate. */
  LICENSE_SERVER_RATE_PER_ADDRESS: z.coerce.number().int().positive().default(120),
  LICENSE_SERVER_RATE_PER_KEY: z.coerce.number().int().positive().default(30),
  /**
   * Ed25519 private key (base64 PKCS#8 DER, from `license-admin signing-key new`) that signs every
   * validate/activate answer. Without it answers are unsigned, as SPEC.md's minimal server.
   */
  LICENSE_SERVER_SIGNING_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/=]+$/, 'expected base64')
    .optional(),
  /** A deployment not seen (validated) for this long loses its slot when another machine needs one. */
  LICENSE_SERVER_STALE_AFTER_HOURS: z.coerce.number().positive().default(72),
});

export type LicenseServerConfig = z.infer<typeof settings>;

export function parseLicenseServerConfig(env: Record<string, string | undefined>): LicenseServerConfig {
  const defined = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ''),
  );
  const result = settings.safeParse(defined);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => `${String(issue.path[0])} (${issue.message})`).join(', '),
  );
}
