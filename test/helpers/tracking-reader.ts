/** A RESP3 tracking client and the pushes it gets (namespace-flush tests: workers, a fleet). */
import { expect } from 'vitest';
import { RawConnection } from './raw-resp.js';

/** A RESP3 tracking client that read every key; `auth` null: the default user as it stands. */
export async function trackingReader(port: number, auth: string[] | null, keys: readonly string[]): Promise<RawConnection> {
  const c = await RawConnection.connect(port);
  if (auth !== null) expect(await c.call('AUTH', ...auth)).toBe('+OK\r\n');
  await c.call('HELLO', '3');
  expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
  for (const key of keys) await c.call('GET', key);
  return c;
}

/** The pushes `reader` gets until it has been quiet for 300 ms. */
export async function pushesUntilQuiet(reader: RawConnection): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    try {
      out.push(await reader.read(300));
    } catch {
      return out;
    }
  }
}

/** The oracle's pushes to a tracking client that read `keys` when another client runs FLUSHDB: one, checked. */
export async function oracleFlushPushes(port: number, keys: readonly string[]): Promise<string[]> {
  const writer = await RawConnection.connect(port);
  for (const key of keys) await writer.call('SET', key, '1');
  const alone = await trackingReader(port, null, keys);
  expect(await writer.call('FLUSHDB')).toBe('+OK\r\n');
  const want = await pushesUntilQuiet(alone);
  expect(want).toHaveLength(1);
  alone.close();
  writer.close();
  return want;
}
