// docs/configuration.md is generated from the config schema, defaults, flags and comments
// (scripts/gen-config-doc.mjs reads the built dist/, which `npm test` builds before vitest runs):
// the committed page must be what the current code generates, as config-validator.test.ts checks
// for the generated validator.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

describe('docs/configuration.md', () => {
  it('is generated from the current config code (else: npm run docs:config)', () => {
    const r = spawnSync(process.execPath, ['scripts/gen-config-doc.mjs', '--check'], { cwd: repoRoot, encoding: 'utf8' });
    expect(r.status, `docs/configuration.md is stale: npm run docs:config\n${r.stderr}${r.stdout}`).toBe(0);
  });
});
