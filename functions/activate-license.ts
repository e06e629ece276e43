import middy from '@middy/core';
import { z } from 'zod';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { fromValidationError } from '#lib/http/error-mapper';
import { activateLicense } from '#lib/license/activation';
import { createLicensing, setLicensing } from '#lib/license/index';

const input = z.strictObject({
  licenseKey: z.string().trim().min(1, 'licenseKey is required'),
  email: z.string().trim().email('email must be an email address'),
  serverUrl: z.string().url().optional(),
});

/**
 * The activation CLI as a directly invoked function (`serverless invoke local -f activateLicense
 * -d '{"licenseKey": "...", "email": "..."}'`, or an AWS Lambda invoke). Not behind API Gateway.
 */
export const handler = middy().handler(async (event: unknown) => {
  const parsed = input.safeParse(event);
  if (!parsed.success) {
    return {
      success: false,
      message: fromValidationError(parsed.error).message,
      type: null,
      expiresAt: null,
    };
  }
  const { licenseKey, email, serverUrl } = parsed.data;
  const config = await getConfig();
  const licensing = createLicensing(
    { ...config, ...(serverUrl ? { LICENSE_SERVER_URL: serverUrl } : {}) },
    await getDatabase(),
  );
  const result = await activateLicense(licensing, licenseKey, email);
  // The container's licensing reads the new file on its next use.
  setLicensing(undefined);
  return result;
});
