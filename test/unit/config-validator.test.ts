// The config file's validator is generated ahead of time (src/config/schema-validator.ts): the
// committed src/config/config-validator.cjs must be what the current schema and ajv generate.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configValidatorSource } from '../../src/config/schema-validator.js';

describe('config-validator.cjs', () => {
  it('is generated from the current schema (else: npm run build && node scripts/gen-config-validator.mjs)', () => {
    const committed = readFileSync(new URL('../../src/config/config-validator.cjs', import.meta.url), 'utf8');
    expect(committed === configValidatorSource(), 'src/config/config-validator.cjs is stale: npm run build && node scripts/gen-config-validator.mjs').toBe(true);
  });
});
