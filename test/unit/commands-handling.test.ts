import { describe, expect, it } from 'vitest';
import { CommandFlag, commandFlagNames, keySpecFlagNames, KeySpecFlag, parseCommandFlags, parseKeySpecFlags } from '../../src/commands/command-flags.js';
import { CommandTable } from '../../src/commands/command-table.js';
import {
  commandFamily,
  refusalReason,
  LOCAL_COMMANDS,
  REFUSED_COMMANDS,
  requestPolicy,
  responsePolicy,
} from '../../src/commands/proxy-handling.js';

const table = CommandTable.builtin();
const b = (...words: string[]): Buffer[] => words.map((w) => Buffer.from(w));

function handling(...words: string[]) {
  const args = b(...words);
  const spec = table.lookup(args);
  expect(spec, words.join(' ')).toBeDefined();
  return commandFamily(spec!, { args });
}

describe('command flags', () => {
  it('parses Valkey flag names into bits and back', () => {
    const bits = parseCommandFlags(['write', 'DENYOOM', 'movablekeys', 'no_such_flag']);
    expect(bits).toBe(CommandFlag.WRITE | CommandFlag.DENYOOM | CommandFlag.MOVABLE_KEYS);
    expect(commandFlagNames(bits)).toEqual(['write', 'denyoom', 'movablekeys']);
    for (const n of ['readonly', 'admin', 'pubsub', 'noscript', 'blocking', 'loading', 'stale', 'no_auth', 'fast', 'no_multi', 'allow_busy']) {
      expect(parseCommandFlags([n]), n).not.toBe(0);
    }
  });

  it('every flag name in the built-in table is known', () => {
    for (const name of table.names()) {
      const spec = table.get(name)!;
      for (const f of spec.flagNames ?? []) expect(parseCommandFlags([f]), `${name}: ${f}`).not.toBe(0);
    }
  });

  it('parses key-spec flags', () => {
    const bits = parseKeySpecFlags(['RW', 'access', 'delete', 'incomplete']);
    expect(bits).toBe(KeySpecFlag.RW | KeySpecFlag.ACCESS | KeySpecFlag.DELETE | KeySpecFlag.INCOMPLETE);
    expect(keySpecFlagNames(bits)).toEqual(['RW', 'access', 'delete', 'incomplete']);
  });
});

describe('commandFamily()', () => {
  it.each([
    ['ping'],
    ['echo', 'x'],
    ['quit'],
    ['hello', '3'],
    ['auth', 'pw'],
    ['select', '0'],
    ['reset'],
    ['client', 'setname', 'x'],
    ['CLIENT', 'GETNAME'],
    ['client', 'id'],
    ['client', 'info'],
    ['client', 'setinfo', 'lib-name', 'x'],
    ['readonly'],
    ['readwrite'],
    ['info', 'clients'],
    ['INFO', 'CLIENTS'],
    ['client', 'no-evict', 'on'],
    ['client', 'reply', 'skip'],
  ])('local: %j', (...words) => {
    expect(handling(...words)).toBe('local');
  });

  it.each([['mget', 'a', 'b'], ['mset', 'a', '1'], ['del', 'a'], ['unlink', 'a', 'b'], ['exists', 'a'], ['touch', 'a']])('multiKey: %j', (...words) => {
    expect(handling(...words)).toBe('multiKey');
  });

  it.each([['multi'], ['exec'], ['discard'], ['watch', 'k'], ['unwatch']])('transaction: %j', (...words) => {
    expect(handling(...words)).toBe('transaction');
  });

  it.each([
    ['blpop', 'k', '0'],
    ['brpop', 'k', '0'],
    ['blmove', 'a', 'b', 'left', 'right', '0'],
    ['blmpop', '0', '1', 'k', 'left'],
    ['bzpopmin', 'k', '0'],
    ['bzmpop', '0', '1', 'k', 'min'],
    ['brpoplpush', 'a', 'b', '0'],
    ['xread', 'BLOCK', '0', 'STREAMS', 's', '$'],
    ['xread', 'count', '1', 'block', '10', 'streams', 's', '$'],
    ['xreadgroup', 'GROUP', 'g', 'c', 'BLOCK', '0', 'STREAMS', 's', '>'],
    ['client', 'unblock', '7'],
  ])('blocking: %j', (...words) => {
    expect(handling(...words)).toBe('blocking');
  });

  it.each([['subscribe', 'ch'], ['psubscribe', 'p*'], ['ssubscribe', 'ch'], ['unsubscribe'], ['punsubscribe'], ['sunsubscribe'], ['publish', 'ch', 'm'], ['pubsub', 'numsub', 'ch'], ['pubsub', 'numpat'], ['pubsub', 'channels']])(
    'pubsub: %j',
    (...words) => {
      expect(handling(...words)).toBe('pubsub');
    },
  );

  it.each([['eval', 'return 1', '1', 'k'], ['eval', 'return 1', '0'], ['evalsha', 'abc', '0'], ['fcall', 'f', '1', 'k'], ['fcall_ro', 'f', '0'], ['script', 'kill'], ['function', 'kill'], ['function', 'stats']])(
    'script: %j',
    (...words) => {
      expect(handling(...words)).toBe('script');
    },
  );

  it.each([
    ['cluster', 'slots'], ['cluster', 'shards'], ['cluster', 'nodes'], ['cluster', 'info'], ['cluster', 'myid'],
    ['cluster', 'myshardid'], ['cluster', 'keyslot', 'k'], ['cluster', 'countkeysinslot', '1'],
    ['cluster', 'getkeysinslot', '1', '10'], ['cluster', 'links'], ['cluster', 'replicas', 'abc'],
  ])('cluster (emulated): %j', (...words) => {
    expect(handling(...words)).toBe('cluster');
  });

  it('ASKING is answered locally (respool follows ASK itself)', () => {
    expect(handling('asking')).toBe('local');
  });

  it('replication: SYNC and PSYNC; REPLCONF stays refused', () => {
    expect(handling('sync')).toBe('replication');
    expect(handling('psync', '?', '-1')).toBe('replication');
    expect(handling('replconf', 'ack', '0')).toBe('refused');
  });

  it('monitor: ["monitor"]', () => {
    expect(handling('monitor')).toBe('monitor');
  });

  it.each([['client', 'tracking', 'on'], ['client', 'caching', 'yes'], ['client', 'getredir'], ['client', 'trackinginfo']])('tracking: %j', (...words) => {
    expect(handling(...words)).toBe('tracking');
  });

  it.each([['client', 'list'], ['client', 'kill', 'id', '1'], ['client', 'pause', '100'], ['client', 'unpause']])('clients: %j', (...words) => {
    expect(handling(...words)).toBe('clients');
  });

  it.each([
    ['shutdown'],
    ['cluster', 'meet', '127.0.0.1', '7000'],
    ['cluster', 'addslots', '1'],
    ['cluster', 'setslot', '1', 'stable'],
    ['cluster', 'failover'],
    ['cluster', 'reset'],
    ['cluster', 'count-failure-reports', 'abc'],
  ])('refused: %j', (...words) => {
    expect(handling(...words)).toBe('refused');
    const args = b(...words);
    expect(refusalReason(table.lookup(args)!)).toMatch(/connection|node|writes/);
  });

  it.each([
    ['keys', '*'],
    ['dbsize'],
    ['flushall'],
    ['flushdb', 'async'],
    ['scan', '0'],
    ['randomkey'],
    ['function', 'load', 'code'],
    ['function', 'flush'],
    ['script', 'load', 'return 1'],
    ['script', 'exists', 'abc'],
    ['wait', '1', '0'],
    ['waitaof', '1', '0', '0'],
    ['config', 'set', 'maxmemory', '0'],
    ['memory', 'purge'],
    ['pubsub', 'shardchannels'],
    ['save'],
    ['bgsave'],
    ['bgsave', 'schedule'],
    ['bgrewriteaof'],
  ])('allShards: %j', (...words) => {
    expect(handling(...words)).toBe('allShards');
  });

  it('SAVE, BGSAVE and BGREWRITEAOF (no tips) answer the first reply when every primary succeeded', () => {
    for (const name of ['save', 'bgsave', 'bgrewriteaof']) expect(responsePolicy(table.lookup(b(name))!)).toBe('all_succeeded');
  });

  it.each([
    ['info'],
    ['info', 'server'],
    ['info', 'clients', 'server'],
    ['info', 'everything'],
  ])('info: %j', (...words) => {
    expect(handling(...words)).toBe('info');
  });

  it.each([
    ['time'],
    ['command'],
    ['command', 'info', 'get'],
    ['lastsave'],
    ['memory', 'stats'],
    ['client', 'nosuchsub'],
    ['config', 'get', 'maxmemory'],
  ])('anyNode: %j', (...words) => {
    expect(handling(...words)).toBe('anyNode');
  });

  it.each([
    ['get', 'k'],
    ['set', 'k', 'v'],
    ['xread', 'COUNT', '1', 'STREAMS', 's', '0'],
    ['xreadgroup', 'GROUP', 'g', 'c', 'STREAMS', 's', '>'],
    ['sort', 'k', 'store', 'd'],
    ['sort_ro', 'k'],
    ['object', 'encoding', 'k'],
    ['xinfo', 'stream', 's'],
    ['memory', 'usage', 'k'],
    ['spublish', 'ch', 'm'],
    ['migrate', 'h', '1', 'k', '0', '10'],
  ])('keyed: %j', (...words) => {
    expect(handling(...words)).toBe('keyed');
    const args = b(...words);
    expect(refusalReason(table.lookup(args)!)).toBeUndefined();
  });

  it('gives every command of the table a handling', () => {
    const counts: Record<string, number> = {};
    for (const name of table.names()) {
      const spec = table.get(name)!;
      const h = commandFamily(spec, { args: b(...name.split('|')) });
      counts[h] = (counts[h] ?? 0) + 1;
      if (h === 'refused') expect(refusalReason(spec), name).toBeTruthy();
    }
    expect(Object.keys(counts).sort()).toEqual(['allShards', 'anyNode', 'blocking', 'clients', 'cluster', 'info', 'keyed', 'local', 'monitor', 'multiKey', 'pubsub', 'refused', 'replication', 'script', 'tracking', 'transaction']);
    // COMMANDLOG is Valkey 8.1's: answered by respool whichever table the upstream has (handlers/observe.ts)
    for (const n of LOCAL_COMMANDS) if (!n.startsWith('commandlog|')) expect(table.get(n), n).toBeDefined();
    for (const n of REFUSED_COMMANDS.keys()) expect(table.get(n), n).toBeDefined();
  });

  it('reads request and response policies from the tips', () => {
    expect(requestPolicy(table.get('dbsize')!)).toBe('all_shards');
    expect(responsePolicy(table.get('dbsize')!)).toBe('agg_sum');
    expect(requestPolicy(table.get('mget')!)).toBe('multi_shard');
    expect(requestPolicy(table.get('get')!)).toBeUndefined();
  });
});
