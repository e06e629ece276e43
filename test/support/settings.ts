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

/**
 * Settings a test changes as it goes (`set`, as often as it needs), each read afresh by the
 * config; `restore` puts back what each was before its first change.
 */
export function changingSettings() {
  const saved: Record<string, string | undefined> = {};
  return {
    /** What each changed setting was before the first change. */
    saved,
    set(settings: Record<string, string>): void {
      for (const [name, value] of Object.entries(settings)) {
        if (!(name in saved)) saved[name] = process.env[name];
        process.env[name] = value;
      }
      resetConfig();
    },
    restore(): void {
      for (const [name, value] of Object.entries(saved))
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      resetConfig();
    },
  };
}
