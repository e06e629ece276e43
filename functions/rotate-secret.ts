import middy from '@middy/core';
import { z } from 'zod';
import { rotateSecret } from '#lib/admin/rotate-secret';
import { loadConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { ApiError } from '#lib/errors';
import { fromValidationError } from '#lib/http/error-mapper';

const input = z.strictObject({
  previousSecret: z.string().min(1, 'previousSecret must not be empty').optional(),
});

/**
 * The rotate-secret CLI as a directly invoked function (`serverless invoke -f rotateSecret -d
 * '{"previousSecret": "..."}'`, or an AWS Lambda invoke), after DBADMIN_SECRET changed in SSM.
 * Not behind API Gateway. Answers `{success, message}` and, when it ran, the rotation's report.
 */
export const handler = middy().handler(async (event: unknown) => {
  const parsed = input.safeParse(event ?? {});
  if (!parsed.success) return { success: false, message: fromValidationError(parsed.error).message };
  // Read now, not at this container's cold start: the secret has just changed in SSM.
  const config = await loadConfig();
  try {
    const report = await rotateSecret(await getDatabase(), {
      secret: config.DBADMIN_SECRET,
      previousSecret: parsed.data.previousSecret,
      licenseDataDir: config.LICENSE_DATA_DIR,
    });
    const done = report.busy.length === 0;
    const message = done
      ? `re-derived ${report.roles.length} role passwords in ${report.schemas} schemas; license file ${report.licenseFile}`
      : `schemas whose roles stayed busy: ${report.busy.join(', ')}; invoke again`;
    return { success: done, message, ...report };
  } catch (error) {
    if (!(error instanceof ApiError && error.status < 500)) throw error;
    return { success: false, message: error.message };
  }
});
