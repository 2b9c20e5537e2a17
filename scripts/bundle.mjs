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
});
