import { Writable } from 'node:stream';

import { describe, expect, it } from 'vitest';

import { createLogger, isLogLevel, log, setLogLevel } from '../../src/util/logger.js';

function sink(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString('utf8'));
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('logger', () => {
  it('writes JSON lines named respool with a level label and ISO time', () => {
    const out = sink();
    const logger = createLogger('info', { destination: out.stream });
    logger.info({ node: '127.0.0.1:7000' }, 'link up');
    logger.debug('hidden');
    const lines = out.lines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ name: 'respool', level: 'info', msg: 'link up', node: '127.0.0.1:7000' });
    expect(String(lines[0]!['time'])).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('honours the level and can be re-leveled', () => {
    const out = sink();
    const logger = createLogger('warn', { destination: out.stream });
    logger.info('no');
    logger.warn('yes');
    logger.level = 'debug';
    logger.debug('now yes');
    expect(out.lines().map((l) => l['msg'])).toEqual(['yes', 'now yes']);
  });

  it('rejects unknown levels with a clear message', () => {
    expect(() => createLogger('verbose')).toThrow(/log level must be one of .*"verbose"/);
    expect(() => setLogLevel('loud')).toThrow(/log level/);
    expect(isLogLevel('trace')).toBe(true);
    expect(isLogLevel('TRACE')).toBe(false);
  });

  it('the module-level log can be re-leveled', () => {
    const before = log.level;
    setLogLevel('error');
    expect(log.level).toBe('error');
    setLogLevel(before);
    expect(log.level).toBe(before);
  });
});
