// Jest transformer: TypeScript (and Middy's ESM) to CommonJS with esbuild, the bundler we already
// ship with. Chosen over @swc/jest, whose per-platform binaries the registry here does not all carry.
const { transformSync } = require('esbuild');

module.exports = {
  process(source, path) {
    const { code, map } = transformSync(source, {
      loader: path.endsWith('.ts') ? 'ts' : 'js',
      format: 'cjs',
      target: 'node20',
      sourcemap: 'external',
      sourcefile: path,
      // import() becomes require(): Jest's CommonJS sandbox cannot run dynamic imports.
      supported: { 'dynamic-import': false },
    });
    return { code, map };
  },
};
