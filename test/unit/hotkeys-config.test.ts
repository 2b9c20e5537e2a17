import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, parseCommandLine, type RespoolConfig } from '../../src/config/load-config.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';

const dir = mkdtempSync(join(tmpdir(), 'respool-hotkeys-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const yamlFile = (text: string) => {
  const path = join(dir, `h${++n}.yaml`);
  writeFileSync(path, text);
  return path;
};
const UP = ['--upstream', '127.0.0.1:7000'];
function run(argv: string[]): RespoolConfig {
  const r = parseCommandLine(argv, {});
  if (r.kind !== 'run') throw new Error('expected run');
  return r.config;
}
function errorOf(argv: string[]): string {
  try {
    parseCommandLine(argv, {});
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('hotKeys configuration', () => {
  it('has defaults: detection on at 1%, no split keys, auto-split off', () => {
    const c = run(UP);
    expect(c.hotKeys).toEqual({
      detection: { enabled: true, sampleRate: 0.01, windowMs: 10_000, topK: 10, keyNamesInMetrics: false },
      split: [],
      autoSplit: { enabled: false, share: 0.5, copies: null },
      readChoice: 'roundRobin',
      maxCopyAge: 10_000,
    });
    expect(DEFAULT_CONFIG.hotKeys.split).toEqual([]);
  });

  it('reads the hotKeys section of the file', () => {
    const file = yamlFile(`
hotKeys:
  detection: { enabled: false, sampleRate: 0.25, windowMs: 2s, topK: 20 }
  split:
    - key: "product:42"
      copies: 6
    - prefix: "session:"
    - pattern: "feed:*:top"
      copies: 3
  autoSplit: { enabled: true, share: 0.3, copies: 3 }
  readChoice: random
  maxCopyAge: 30s
`);
    const c = run([...UP, '--config', file]);
    expect(c.hotKeys.maxCopyAge).toBe(30_000);
    expect(c.hotKeys.detection).toEqual({ enabled: false, sampleRate: 0.25, windowMs: 2000, topK: 20, keyNamesInMetrics: false });
    expect(c.hotKeys.split).toEqual([
      { key: 'product:42', copies: 6 },
      { prefix: 'session:', copies: null },
      { pattern: 'feed:*:top', copies: 3 },
    ]);
    expect(c.hotKeys.autoSplit).toEqual({ enabled: true, share: 0.3, copies: 3 });
    expect(c.hotKeys.readChoice).toBe('random');
  });

  it('keeps defaults for the fields a file leaves out', () => {
    const c = run([...UP, '--config', yamlFile('hotKeys:\n  detection: { sampleRate: 0.5 }\n')]);
    expect(c.hotKeys.detection).toEqual({ enabled: true, sampleRate: 0.5, windowMs: 10_000, topK: 10, keyNamesInMetrics: false });
  });

  it('takes flags over the file', () => {
    const file = yamlFile('hotKeys:\n  detection: { sampleRate: 0.5 }\n  split: [{ key: a }]\n');
    const c = run([...UP, '--config', file, '--hot-keys-sample-rate', '0.1', '--hot-keys-window', '5s',
      '--hot-keys-detection', 'off', '--split-key', 'hot', '--split-key', 'other=6']);
    expect(c.hotKeys.detection).toEqual({ enabled: false, sampleRate: 0.1, windowMs: 5000, topK: 10, keyNamesInMetrics: false });
    expect(c.hotKeys.split).toEqual([{ key: 'hot', copies: null }, { key: 'other', copies: 6 }]);
  });

  it('names the field of a bad value', () => {
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  detection: { sampleRate: 2 }\n')]))
      .toMatch(/hotKeys\.detection\.sampleRate: .*above 0 and at most 1/);
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  split: [{ key: a, prefix: b }]\n')]))
      .toMatch(/hotKeys\.split\[0\]: give exactly one of key, prefix, pattern/);
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  split: [{ copies: 3 }]\n')]))
      .toMatch(/hotKeys\.split\[0\]: give exactly one of key, prefix, pattern \(got none\)/);
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  split: [{ key: a, copies: 0 }]\n')]))
      .toMatch(/hotKeys\.split\[0\]\.copies: must be an integer from 1 to 1024/);
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  bogus: 1\n')])).toMatch(/unknown field "bogus" in hotKeys/);
    expect(errorOf([...UP, '--config', yamlFile('hotKeys:\n  readChoice: rr\n')])).toMatch(/hotKeys\.readChoice: must be one of roundRobin, random/);
    expect(errorOf([...UP, '--hot-keys-sample-rate', '0'])).toMatch(/--hot-keys-sample-rate: must be a number above 0/);
    expect(errorOf([...UP, '--hot-keys-detection', 'maybe'])).toMatch(/--hot-keys-detection: must be one of on, off/);
    expect(errorOf([...UP, '--split-key', 'k=0'])).toMatch(/--split-key: copies must be an integer from 1 to 1024/);
  });

  it('documents the flags and the RESPOOL command in --help', () => {
    const help = parseCommandLine(['--help']);
    expect(help.kind).toBe('help');
    const text = (help as { text: string }).text;
    expect(text).toMatch(/--split-key KEY\[=COPIES\]/);
    expect(text).toMatch(/--hot-keys-sample-rate/);
    expect(text).toMatch(/RESPOOL HOTKEYS/);
  });
});
