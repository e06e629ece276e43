import { resetConfig } from '#lib/config';

/**
 * A setting (an environment variable the config reads) at `value` for the enclosing describe
 * block, read afresh by the config, and put back after it.
 */
export function withSetting(name: string, value: string): void {
  const before = process.env[name];
  beforeAll(() => {
    process.env[name] = value;
    resetConfig();
  });
  afterAll(() => {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
    resetConfig();
  });
}
