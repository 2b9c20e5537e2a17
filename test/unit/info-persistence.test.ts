import { describe, expect, it } from 'vitest';
import { mergePersistence, type InfoSection } from '../../src/handlers/info-sections.js';

const section = (fields: Record<string, string | number>): InfoSection => ({
  header: 'Persistence',
  lines: Object.entries(fields).map(([k, v]) => `${k}:${v}`),
});

const field = (s: InfoSection, name: string) => s.lines.find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1);

describe('INFO persistence over several primaries (mergePersistence)', () => {
  // The node with keys to save is not the first one: its save must show as the cluster's.
  const first = section({ loading: 0, rdb_changes_since_last_save: 2, rdb_bgsave_in_progress: 0, rdb_last_save_time: 1700000100, rdb_last_bgsave_status: 'ok', rdb_last_bgsave_time_sec: 0, rdb_saves: 1, current_fork_perc: '0.00', aof_enabled: 0, aof_rewrite_in_progress: 0, aof_last_write_status: 'ok' });
  const saving = section({ loading: 0, rdb_changes_since_last_save: 5, rdb_bgsave_in_progress: 1, rdb_last_save_time: 1700000000, rdb_last_bgsave_status: 'err', rdb_last_bgsave_time_sec: 12, rdb_saves: 1, current_fork_perc: '50.00', aof_enabled: 0, aof_rewrite_in_progress: 0, aof_last_write_status: 'ok' });
  const merged = mergePersistence([first, saving]);

  it('is in progress when any primary is, and err when any status is', () => {
    expect(field(merged, 'rdb_bgsave_in_progress')).toBe('1');
    expect(field(merged, 'aof_rewrite_in_progress')).toBe('0');
    expect(field(merged, 'loading')).toBe('0');
    expect(field(merged, 'rdb_last_bgsave_status')).toBe('err');
    expect(field(merged, 'aof_last_write_status')).toBe('ok');
  });

  it('sums changes and saves, takes the longest duration and the oldest save, averages percentages', () => {
    expect(field(merged, 'rdb_changes_since_last_save')).toBe('7');
    expect(field(merged, 'rdb_saves')).toBe('2');
    expect(field(merged, 'rdb_last_bgsave_time_sec')).toBe('12');
    expect(field(merged, 'rdb_last_save_time')).toBe('1700000000');
    expect(field(merged, 'current_fork_perc')).toBe('25.00');
  });

  it('keeps Valkey\'s field order and header; no primary: an empty section', () => {
    expect(merged.header).toBe('Persistence');
    expect(merged.lines.map((l) => l.split(':')[0])).toEqual(first.lines.map((l) => l.split(':')[0]));
    expect(mergePersistence([])).toEqual({ header: 'Persistence', lines: [] });
  });
});
