import { closePool } from '#lib/db/pool';
import { logger } from '#lib/log';
import { createKey, sqlAs, tenantSchema } from '#test/security/tenant';

/** What a tenant's SQL says must not reach the service's log, nor pass for a database outage. */

afterAll(closePool);

it('an error whose message looks like a lost connection is the tenant’s 400, not a logged 503', async () => {
  const schema = await tenantSchema('leak');
  const { key } = await createKey(schema, 'service_role');
  const warnings = jest.spyOn(logger, 'warn');
  const errors = jest.spyOn(logger, 'error');
  try {
    const reply = await sqlAs(key, "SELECT 'Connection terminated card=4111111111111111'::int");

    expect(reply.status).toBe(400);
    const logged = JSON.stringify([...warnings.mock.calls, ...errors.mock.calls]);
    expect(logged).not.toContain('4111111111111111');
  } finally {
    warnings.mockRestore();
    errors.mockRestore();
  }
});
