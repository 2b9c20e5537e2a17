// The commands scripts run, for the slow log (client/script-commands.ts): while respool's slow log
// logs every command, the MONITOR relay keeps each node's script runs (an EVAL / FCALL line and
// the `lua` lines after it), and a script call claims its own run by the address the node knows
// its link by and the exact arguments it sent, in order. Lines are parsed back from Valkey's
// sdscatrepr quoting.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ScriptCommands, monitorArgs } from '../../src/client/script-commands.js';
import { repr } from '../../src/client/monitor-feed.js';
import { ScriptLineRelay, type MonitorConnection } from '../../src/client/script-line-relay.js';

class FakeMonitor extends EventEmitter implements MonitorConnection {
  onStream: ((frame: Buffer) => void) | null = null;
  closed = false;
  call(): Promise<Buffer> {
    return Promise.resolve(Buffer.from('+OK\r\n'));
  }
  writeToStream(): void {}
  close(): void {
    this.closed = true;
    this.emit('close');
  }
  stream(line: string): void {
    this.onStream!(Buffer.from(`+1700000000.000001 ${line}\r\n`, 'latin1'));
  }
}

const NODE = '10.0.0.1:7000';
const A = '10.0.0.9:50001';
const B = '10.0.0.9:50002';
const args = (...a: string[]) => a.map((s) => Buffer.from(s));
const shown = (ran: Buffer[][]) => ran.map((c) => c.map((a) => a.toString('latin1')).join(' '));

function setup(threshold = { thresholdUs: 0 }): { conn: FakeMonitor; relay: ScriptLineRelay; commands: ScriptCommands } {
  const conn = new FakeMonitor();
  const relay = new ScriptLineRelay({ nodes: () => [{ host: '10.0.0.1', port: 7000, address: NODE }], open: () => conn, deliver: () => undefined });
  return { conn, relay, commands: new ScriptCommands(relay, { slowlog: threshold }) };
}

describe('the commands a script ran, for the slow log', () => {
  it('parses a MONITOR line\'s arguments back to their bytes (sdscatrepr\'s escapes)', () => {
    const bytes = [Buffer.from('a"b\\c\n\r\t\x07\x08'), Buffer.from([0x00, 0xff, 0x20, 0x7f]), Buffer.alloc(0)];
    expect(monitorArgs(Buffer.from(bytes.map(repr).join(' '), 'latin1'))).toEqual(bytes);
    expect(monitorArgs(Buffer.from('"unterminated'))).toBeNull();
  });

  it('follows the nodes only while the threshold is 0; the relay stays for MONITOR', async () => {
    const threshold = { thresholdUs: 10_000 };
    const { conn, relay, commands } = setup(threshold);
    expect(commands.sync()).toBeNull();
    expect(commands.active).toBe(false);
    threshold.thresholdUs = 0;
    await commands.sync();
    expect(commands.active).toBe(true);
    await relay.start(); // someone monitors too
    threshold.thresholdUs = 100;
    expect(commands.sync()).toBeNull();
    expect(conn.closed).toBe(false); // MONITOR still wants it
    relay.stop();
    expect(conn.closed).toBe(true);
  });

  it('each call takes its own run: by its link\'s address and arguments, in order; a link\'s older runs go', async () => {
    const { conn, commands } = setup();
    await commands.sync();
    conn.stream(`[0 ${A}] "EVAL" "return server.call('echo', ARGV[1])" "0" "a"`);
    conn.stream('[0 lua] "echo" "a"');
    conn.stream(`[0 ${B}] "EVAL" "return server.call('echo', ARGV[1])" "0" "a"`); // the same script and arguments, another link
    conn.stream('[0 lua] "echo" "a-from-b"');
    conn.stream(`[0 ${A}] "get" "k"`); // another command ends a run
    conn.stream('[0 lua] "set" "stray" "1"'); // a line after no script command belongs to none
    conn.stream(`[0 ${A}] "FCALL" "f" "0"`);
    conn.stream('[0 lua] "ping"');
    conn.stream('[0 lua] "ping"');
    const sent = args('EVAL', "return server.call('echo', ARGV[1])", '0', 'a');
    expect(shown(commands.take(NODE, B, sent))).toEqual(['echo a-from-b']);
    expect(shown(commands.take(NODE, A, args('FCALL', 'f', '0')))).toEqual(['ping', 'ping']);
    expect(commands.take(NODE, A, sent)).toEqual([]); // older than A's FCALL: dropped when that was claimed
    expect(commands.take('10.0.0.2:7000', A, sent)).toEqual([]); // a node not followed
  });

  it('an EVALSHA run again after NOSCRIPT takes the run that ran commands', async () => {
    const { conn, commands } = setup();
    await commands.sync();
    const sha = 'a'.repeat(40);
    conn.stream(`[0 ${A}] "EVALSHA" "${sha}" "0"`); // NOSCRIPT: nothing ran
    conn.stream(`[0 ${A}] "SCRIPT" "LOAD" "server.call('ping')"`);
    conn.stream(`[0 ${A}] "EVALSHA" "${sha}" "0"`);
    conn.stream('[0 lua] "ping"');
    expect(shown(commands.take(NODE, A, args('EVALSHA', sha, '0'), true))).toEqual(['ping']);
  });

  it('when the node sees other addresses than respool\'s (a NAT), a run is matched by its arguments alone', async () => {
    const { conn, commands } = setup();
    await commands.sync();
    conn.stream('[0 192.168.1.1:4000] "EVAL" "server.call(\'ping\')" "0"');
    conn.stream('[0 lua] "ping"');
    expect(shown(commands.take(NODE, A, args('EVAL', "server.call('ping')", '0')))).toEqual(['ping']);
  });

  it('respool\'s own scripts (the fleet\'s state) are not kept', async () => {
    const { conn, relay, commands } = setup();
    await commands.sync();
    conn.stream(`[0 ${A}] "EVAL" "return 1" "1" "{respool-fleet}:state"`);
    conn.stream('[0 lua] "get" "{respool-fleet}:state"');
    expect(relay.runsOn(NODE)).toEqual([]);
  });
});
