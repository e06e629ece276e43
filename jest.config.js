/** Jest runs TypeScript through esbuild; Middy and openid-client (with oauth4webapi and jose) ship ESM only, so they are transformed too. */
module.exports = {
  testEnvironment: 'node',
  // bin/x.ts beside its bin/x.cjs launcher: an import of bin/x means the module, not the launcher.
  moduleFileExtensions: ['ts', 'tsx', 'js', 'mjs', 'cjs', 'jsx', 'json', 'node'],
  transform: { '^.+\\.(t|j)sx?$': '<rootDir>/test/support/esbuild-transform.cjs' },
  transformIgnorePatterns: ['/node_modules/(?!(@middy|openid-client|oauth4webapi|jose)/)'],
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
