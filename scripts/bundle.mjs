#!/usr/bin/env node
// Second step of `npm run build`, after tsc has compiled src/ to dist/ (one file per module):
//  1. copies src/config/config-validator.cjs (generated, see src/config/schema-validator.ts) to
//     dist/config/, which tsc does not do for .cjs files;
//  2. bundles dist/ into dist/respool.js, the file bin/respool.js runs. One module instead of a
//     hundred, without comments or indentation, saves every sidecar about 5 MiB of memory and
//     starts faster (bench/footprint.mjs). Dependencies stay in node_modules (--packages=external);
//     names are kept (no identifier minifying) and dist/respool.js.map maps back to src/ for
//     `node --enable-source-maps`.

import { copyFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const at = (p) => path.join(root, p);

copyFileSync(at('src/config/config-validator.cjs'), at('dist/config/config-validator.cjs'));
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
  logLevel: 'warning',
});
