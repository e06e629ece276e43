'use strict';
// esbuild plugins for every bundle of the functions: serverless-esbuild loads this file
// (custom.esbuild.plugins in serverless.yml) for `npm run dev` and the Lambda packages, and
// bin/build.ts for `npm start` and the container. One list, so every host bundles the same way.
const { readFileSync } = require('node:fs');
const { dirname, join } = require('node:path');
const { brotliCompressSync, constants } = require('node:zlib');

const WASM_DIR = dirname(require.resolve('libpg-query/wasm/libpg-query.wasm'));
const WASM = join(WASM_DIR, 'libpg-query.wasm');
const INDEX = join(WASM_DIR, 'index.cjs');

let packed;
/** The WebAssembly, compressed once per process (1.1 MB -> 0.2 MB; a rebuild in watch mode reuses it). */
const packedWasm = () => {
  packed ??= brotliCompressSync(readFileSync(WASM), { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } });
  return packed;
};

/**
 * PostgreSQL's parser (libpg-query, WebAssembly) inside the bundle that reads SQL
 * (lib/admin/query-schema), compressed: no .wasm file to ship beside it to Lambda, dist/ or the
 * container. libpg-query starts its WebAssembly module as it loads, from a file beside its own
 * code; in a bundle its module is given the bytes instead, through Emscripten's instantiateWasm.
 */
const embeddedPgParser = {
  name: 'embedded-pg-parser',
  setup(build) {
    let embedded = false;
    build.onStart(() => {
      embedded = false;
    });
    build.onResolve({ filter: /^\.\/libpg-query\.js$/ }, (args) =>
      args.importer === INDEX ? { path: 'module', namespace: 'embedded-pg-parser' } : undefined,
    );
    build.onLoad({ filter: /^module$/, namespace: 'embedded-pg-parser' }, () => {
      embedded = true;
      return {
        resolveDir: WASM_DIR,
        loader: 'js',
        contents: `
          const { brotliDecompressSync } = require('node:zlib');
          const start = require('./libpg-query.js');
          const packed = require('./libpg-query.wasm');
          module.exports = (options = {}) => start({
            ...options,
            instantiateWasm(imports, receive) {
              const wasm = new WebAssembly.Module(brotliDecompressSync(packed));
              receive(new WebAssembly.Instance(wasm, imports));
              return {};
            },
          });`,
      };
    });
    build.onLoad({ filter: /\.wasm$/ }, (args) =>
      args.path === WASM ? { contents: packedWasm(), loader: 'binary' } : undefined,
    );
    // libpg-query bundled, but its module not given the bytes: it would look for a file not there.
    build.onEnd((result) => {
      const inputs = Object.keys(result.metafile?.inputs ?? {});
      if (!embedded && inputs.some((input) => input.endsWith('libpg-query/wasm/index.cjs'))) {
        return { errors: [{ text: `embedded-pg-parser: ${INDEX} no longer loads ./libpg-query.js` }] };
      }
    });
    build.initialOptions.metafile = true;
  },
};

module.exports = [embeddedPgParser];
