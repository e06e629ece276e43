import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Settings every test process starts with; DATABASE_URL comes from the global setup.
process.env.AUTH_USER = 'test-admin';
process.env.AUTH_PASS = 'test-admin-password';
process.env.DBADMIN_SECRET = 'test-secret-0123456789abcdef0123456789abcdef';
process.env.LICENSE_DATA_DIR = mkdtempSync(join(tmpdir(), 'dbadmin-license-data-'));
process.env.NODE_ENV = 'test';
// One JSON line per request (and every expected warning) would bury Jest's report: errors only,
// unless a test asks.
process.env.LOG_LEVEL = 'ERROR';
// Every test request comes from 127.0.0.1: the per-address limit is tested on its own.
process.env.LICENSE_SERVER_RATE_PER_ADDRESS = '100000';
// Tests send wrong credentials on purpose, all from 127.0.0.1: the sign-in throttle has its own test.
process.env.AUTH_MAX_FAILURES = '100000';
delete process.env.SSM_PREFIX;
delete process.env.AWS_LAMBDA_FUNCTION_NAME;
delete process.env.LICENSE_SERVER_URL;
delete process.env.LICENSE_ENFORCEMENT;
