import type { SSMClient } from '@aws-sdk/client-ssm';
import { z } from 'zod';
import { databaseUrlSetting, defaultSslMode, withSsmSecrets } from '#lib/config';
import { ConfigError } from '#lib/errors';

/** Read on Lambda from SSM Parameter Store under LICENSE_SERVER_SSM_PREFIX, never from its configuration. */
export const LICENSE_SERVER_SECRETS = ['LICENSE_SERVER_DATABASE_URL', 'LICENSE_SERVER_SIGNING_KEY'] as const;

const settings = (fallbackSslMode: string) =>
  z.object({
    // TLS as the service's DATABASE_URL: verified in full on Lambda unless the URL says disable.
    LICENSE_SERVER_DATABASE_URL: databaseUrlSetting(fallbackSslMode),
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

export type LicenseServerConfig = z.infer<ReturnType<typeof settings>>;

export function parseLicenseServerConfig(env: Record<string, string | undefined>): LicenseServerConfig {
  const defined = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ''),
  );
  const result = settings(defaultSslMode(defined)).safeParse(defined);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => `${String(issue.path[0])} (${issue.message})`).join(', '),
  );
}

/** Settings from the environment, completed on Lambda from SSM as the service's are (lib/config). */
export async function loadLicenseServerConfig(
  env: Record<string, string | undefined> = process.env,
  ssm?: SSMClient,
): Promise<LicenseServerConfig> {
  return parseLicenseServerConfig(
    await withSsmSecrets(env, env.LICENSE_SERVER_SSM_PREFIX, LICENSE_SERVER_SECRETS, ssm),
  );
}
