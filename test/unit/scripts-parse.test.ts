// The benches and build scripts are plain JavaScript that no build step compiles, so a syntax
// error in one (bench/footprint.mjs carried one for a day) shows only when somebody runs it.
// `node --check` parses each without running it.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const scripts = ['bench', 'bench/lib', 'scripts', 'bin'].flatMap((dir) =>
  readdirSync(new URL(dir, ROOT)).filter((f) => /\.(mjs|js|cjs)$/.test(f)).map((f) => `${dir}/${f}`),
);

describe('plain JavaScript scripts', () => {
  it('finds the benches, their library, the build scripts and the bin', () => {
    expect(scripts).toEqual(expect.arrayContaining(['bench/footprint.mjs', 'bench/lib/common.mjs', 'scripts/bundle.mjs', 'bin/respool.js']));
  });

  it.each(scripts)('%s parses', (file) => {
    expect(() => execFileSync(process.execPath, ['--check', file], { cwd: ROOT, stdio: 'pipe' })).not.toThrow();
  });
});
