#!/usr/bin/env node
// The respool command. Plain JavaScript over the compiled dist/ (run `npm run build` first).
import { main } from '../dist/main.js';

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`respool: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
