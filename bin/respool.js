#!/usr/bin/env node
// The respool command. Plain JavaScript over the compiled dist/ (run `npm run build` first).
// It runs dist/respool.js, the one-file bundle of dist/ that `npm run build` makes with esbuild
// (dependencies stay in node_modules): one module instead of a hundred, without comments, takes
// about 5 MiB less memory in every sidecar and starts faster (bench/footprint.mjs).
import { main } from '../dist/respool.js';

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`respool: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
