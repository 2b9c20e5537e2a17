import { describe, expect, it, vi } from 'vitest';
import type net from 'node:net';
import { ListenerSocketOptions } from '../../src/session/socket-options.js';

const nextTurn = () => new Promise((r) => setImmediate(r));

function fakeServer(handle: object | null): net.Server {
  return { _handle: handle } as unknown as net.Server;
}

function fakeSocket() {
  return { setNoDelay: vi.fn(), setKeepAlive: vi.fn() } as unknown as net.Socket & {
    setNoDelay: ReturnType<typeof vi.fn>;
    setKeepAlive: ReturnType<typeof vi.fn>;
  };
}

describe('ListenerSocketOptions: TCP_NODELAY and keepalive from the listening socket', () => {
  it('sets them once on the listener; sockets accepted in the first turn get them per socket, later ones none', async () => {
    const handle = { setNoDelay: vi.fn(() => 0), setKeepAlive: vi.fn(() => 0) };
    const clients = { tcpKeepAliveMs: 300_000 };
    const opts = new ListenerSocketOptions(fakeServer(handle), clients, 'linux');
    opts.apply();
    expect(handle.setNoDelay).toHaveBeenCalledWith(true);
    expect(handle.setKeepAlive).toHaveBeenCalledWith(true, 300); // whole seconds, as socket.setKeepAlive
    // Queued before the listener had the options: per socket.
    const early = fakeSocket();
    opts.accepted(early);
    expect(early.setNoDelay).toHaveBeenCalledWith(true);
    expect(early.setKeepAlive).toHaveBeenCalledWith(true, 300_000);
    await nextTurn();
    expect(opts.inherited).toBe(true);
    const later = fakeSocket();
    opts.accepted(later);
    expect(later.setNoDelay).not.toHaveBeenCalled();
    expect(later.setKeepAlive).not.toHaveBeenCalled();

    // A reload's keepalive applies to the listener again (connections accepted from then on).
    clients.tcpKeepAliveMs = 0;
    opts.apply();
    expect(handle.setKeepAlive).toHaveBeenLastCalledWith(false, 0);
    expect(opts.inherited).toBe(true);
    opts.close();
  });

  it('per socket where the listener cannot pass them on: another platform, a cluster round-robin stand-in, an error', async () => {
    const handle = { setNoDelay: vi.fn(() => 0), setKeepAlive: vi.fn(() => 0) };
    const cases = [
      new ListenerSocketOptions(fakeServer(handle), { tcpKeepAliveMs: 60_000 }, 'darwin'),
      new ListenerSocketOptions(fakeServer({ listen() {}, close() {} }), { tcpKeepAliveMs: 60_000 }, 'linux'),
      new ListenerSocketOptions(fakeServer(null), { tcpKeepAliveMs: 60_000 }, 'linux'),
      new ListenerSocketOptions(fakeServer({ setNoDelay: () => 0, setKeepAlive: () => -22 }), { tcpKeepAliveMs: 500 }, 'linux'),
    ];
    for (const opts of cases) opts.apply();
    expect(handle.setNoDelay).not.toHaveBeenCalled(); // darwin: the listener is left alone
    await nextTurn();
    for (const opts of cases) {
      expect(opts.inherited).toBe(false);
      const s = fakeSocket();
      opts.accepted(s);
      expect(s.setNoDelay).toHaveBeenCalledWith(true);
      expect(s.setKeepAlive).toHaveBeenCalled();
      opts.close();
    }
  });

  it('no keepalive per socket when clients.tcpKeepAliveMs is 0', () => {
    const opts = new ListenerSocketOptions(fakeServer(null), { tcpKeepAliveMs: 0 }, 'linux');
    opts.apply();
    const s = fakeSocket();
    opts.accepted(s);
    expect(s.setNoDelay).toHaveBeenCalledWith(true);
    expect(s.setKeepAlive).not.toHaveBeenCalled();
  });
});
