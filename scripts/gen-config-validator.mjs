#!/usr/bin/env node
// Writes src/config/config-validator.cjs: the config file's schema (src/config/schema.ts)
// compiled by ajv ahead of time (src/config/schema-validator.ts says why). Run after changing the
// schema or upgrading ajv; test/unit/config-validator.test.ts fails until then.
//
//   npm run build && node scripts/gen-config-validator.mjs

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { configValidatorSource } = await import(path.join(root, 'dist/config/schema-validator.js'));
const out = path.join(root, 'src/config/config-validator.cjs');
writeFileSync(out, configValidatorSource());
console.log(`wrote ${path.relative(root, out)}`);
