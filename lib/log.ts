import { Logger } from '@aws-lambda-powertools/logger';

/**
 * The service's one logger: a JSON object per line on stdout, the same on Lambda (where
 * `logFormat: JSON` and `applicationLogLevel` in serverless.yml apply), under serverless-offline
 * and in the container. Level from LOG_LEVEL (or AWS_LAMBDA_LOG_LEVEL on Lambda), INFO by default.
 * Never give it keys, passwords, SQL or SQL parameters.
 */
export const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'dbadmin' });

/**
 * An error for the log: name, message, SQLSTATE and stack, never the other fields (pg's `detail`
 * and `where` can quote row values and SQL).
 */
export function loggedError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const { code } = error as { code?: unknown };
  return {
    name: error.name,
    message: error.message,
    ...(typeof code === 'string' ? { code } : {}),
    stack: error.stack,
    ...(error.cause !== undefined ? { cause: loggedError(error.cause) } : {}),
  };
}
