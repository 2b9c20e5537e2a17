#!/usr/bin/env node
// Second step of `npm run build`, after tsc has compiled src/ to dist/ (one file per module):
//  1. copies src/config/config-validator.cjs (generated, see src/config/schema-validator.ts) to
//     dist/config/, which tsc does not do for .cjs files, and the status page's files
//     (src/admin/status/) to dist/admin/status/;
//  2. bundles dist/ into dist/respool.js, the file bin/respool.js runs. One module instead of a
//     hundred, without comments or indentation, saves every sidecar about 5 MiB of memory and
//     starts faster (bench/footprint.mjs). Dependencies stay in node_modules (--packages=external);
//     names are kept (no identifier minifying) and dist/respool.js.map maps back to src/ for
//     `node --enable-source-maps`.
//  3. node:http and node:fs are taken with require(), not imported as ES modules: an ES import of
//     a builtin builds its module namespace from every export, which runs the builtin's lazy
//     getters — node:http's WebSocket loads all of undici on Node 24, node:fs's promises loads
//     fs/promises and readline — code and heap a proxy never uses (3 MiB of RSS on Node 24). The
//     other builtins respool imports have no costly getters and stay ES imports (see BY_REQUIRE).

import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const at = (p) => path.join(root, p);

copyFileSync(at('src/config/config-validator.cjs'), at('dist/config/config-validator.cjs'));
// the status page (src/admin/status-page.ts serves these files as they are: no build step)
mkdirSync(at('dist/admin/status'), { recursive: true });
for (const f of readdirSync(at('src/admin/status'))) copyFileSync(at(`src/admin/status/${f}`), at(`dist/admin/status/${f}`));
/**
 * The builtins whose ES namespace is costly (see 3. above): `import … from` them in src/ becomes
 * `require()` in the bundle. Only these: a required module's named imports are read through
 * getters esbuild adds (performance.now() through one cost measurably at P=16), where an ES
 * import of a builtin binds them directly.
 */
const BY_REQUIRE = /^node:(http|fs)$/;
const builtinsByRequire = {
  name: 'builtins-by-require',
  setup(b) {
    b.onResolve({ filter: BY_REQUIRE }, (args) => (args.kind === 'import-statement' && args.namespace === 'file' ? { path: args.path, namespace: 'builtin-by-require' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'builtin-by-require' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

await build({
  entryPoints: [at('dist/main.js')],
  outfile: at('dist/respool.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  packages: 'external',
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: true,
  sourcesContent: false,
  // Development checks (src/util/dev-checks.ts) compiled out of the bundle.
  define: { 'process.env.RESPOOL_DEV_CHECKS': '"0"', 'process.env.VITEST': 'undefined' },
  logLevel: 'warning',
  plugins: [builtinsByRequire],
  // the require() those builtins are taken with (an ES module has none of its own)
  banner: { js: "import { createRequire as __respoolCreateRequire } from 'node:module'; const require = __respoolCreateRequire(import.meta.url);" },
});
