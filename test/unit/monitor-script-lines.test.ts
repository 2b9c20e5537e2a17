// MONITOR's order around scripts: a script's lines come from its node's MONITOR connection, on
// another socket than its reply, so while anyone monitors the reply waits until that node's lines
// are in (client/monitor-feed.ts scriptLinesIn): the relay settles the node with a PING on its
// MONITOR connection, whose reply follows every line of what the node ran before it
// (client/script-line-relay.ts settle).
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MonitorFeed } from '../../src/client/monitor-feed.js';
import { ScriptLineRelay, type MonitorConnection } from '../../src/client/script-line-relay.js';
import type { HandlerSession } from '../../src/client/handler-session.js';

/** A node's MONITOR connection: the test plays the node's stream. */
class FakeMonitor extends EventEmitter implements MonitorConnection {
  onStream: ((frame: Buffer) => void) | null = null;
  readonly written: string[] = [];
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
    this.written.push(args.join(' '));
    return Promise.resolve(Buffer.from('+OK\r\n'));
  }
  writeToStream(data: Buffer): void {
    this.written.push(data.toString('latin1'));
  }
  close(): void {
    this.emit('close');
  }
  stream(frame: string): void {
    this.onStream!(Buffer.from(frame, 'latin1'));
  }
}

function relayOver(conn: FakeMonitor, delivered: string[]): ScriptLineRelay {
  return new ScriptLineRelay({
    nodes: () => [{ host: '10.0.0.1', port: 7000, address: '10.0.0.1:7000' }],
    open: () => conn,
    deliver: (line) => delivered.push(line.toString('latin1').trimEnd()),
  });
}

const monitoring = { push: () => undefined } as unknown as HandlerSession;
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('MONITOR: a script\'s reply waits for its lines', () => {
  afterEach(() => vi.useRealTimers());

  it('the relay settles a node once the reply to its PING came, after the lines before it', async () => {
    const conn = new FakeMonitor();
    const delivered: string[] = [];
    const relay = relayOver(conn, delivered);
    await relay.start();
    expect(conn.written).toEqual(['MONITOR']);
    let settled = false;
    void relay.settle('10.0.0.1:7000').then(() => (settled = true));
    await flush();
    expect(conn.written[1]).toBe('*2\r\n$4\r\nPING\r\n$14\r\nrespool-settle\r\n');
    conn.stream('+1.000001 [0 lua] "set" "k" "1"\r\n');
    await flush();
    expect(settled).toBe(false);
    conn.stream('$14\r\nrespool-settle\r\n');
    await flush();
    expect(settled).toBe(true);
    expect(delivered).toEqual(['+1.000001 [0 lua] "set" "k" "1"']); // the PING's reply is not a line
    expect(await relay.settle('10.0.0.9:7000').then(() => 'at once')).toBe('at once'); // a node not monitored
  });

  it('a lost MONITOR connection settles whoever waited on it', async () => {
    const conn = new FakeMonitor();
    const relay = relayOver(conn, []);
    await relay.start();
    const waiting = relay.settle('10.0.0.1:7000');
    await flush();
    conn.close();
    await expect(waiting).resolves.toBeUndefined();
  });

  it('the feed waits for the relay only while someone monitors, and at most a second', async () => {
    const conn = new FakeMonitor();
    const feed = new MonitorFeed(relayOver(conn, []));
    expect(await feed.scriptLinesIn('10.0.0.1:7000').then(() => 'at once')).toBe('at once');
    await feed.add(monitoring);
    vi.useFakeTimers();
    let done = false;
    void feed.scriptLinesIn('10.0.0.1:7000').then(() => (done = true));
    await vi.advanceTimersByTimeAsync(900);
    expect(done).toBe(false); // the node has not answered the PING
    await vi.advanceTimersByTimeAsync(200);
    expect(done).toBe(true);
  });
});
