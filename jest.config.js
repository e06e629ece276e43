/** Jest runs TypeScript through esbuild; Middy ships ESM only, so it is transformed too. */
module.exports = {
  testEnvironment: 'node',
  // bin/x.ts beside its bin/x.cjs launcher: an import of bin/x means the module, not the launcher.
  moduleFileExtensions: ['ts', 'tsx', 'js', 'mjs', 'cjs', 'jsx', 'json', 'node'],
  transform: { '^.+\\.(t|j)sx?$': '<rootDir>/test/support/esbuild-transform.cjs' },
  transformIgnorePatterns: ['/node_modules/(?!@middy/)'],
  moduleNameMapper: {
    '^@middy/([^/]+)$': '<rootDir>/node_modules/@middy/$1/index.js',
    '^#lib/(.*)$': '<rootDir>/lib/$1',
    '^#functions/(.*)$': '<rootDir>/functions/$1',
    '^#test/(.*)$': '<rootDir>/test/$1',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  setupFiles: ['<rootDir>/test/support/env.ts'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testTimeout: 20000,
};
