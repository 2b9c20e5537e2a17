import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import type { RespoolProxy } from '../../src/server.js';
import type { RespoolConfig } from '../../src/config/types.js';

/**
 * Users at run time, as on Valkey (issue 18): ACL SETUSER / DELUSER / GETUSER applied at once to
 * new and existing connections, ACL LOG of respool's own denials in Valkey's format, ACL SAVE /
 * LOAD against an ACL file. Each step runs on a valkey-server and through respool (in front of
 * another server) and the replies are compared.
 */

/** ACL LOG's reply without what differs by nature (age, client info, timestamps): count, reason, context, object, username, entry-id. */
function logSummary(reply: string): string[] {
  const lines = reply.split('\r\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const field = lines[i];
    if (field === 'count' || field === 'entry-id') out.push(`${field}=${lines[i + 1]}`);
    if (field === 'reason' || field === 'context' || field === 'object' || field === 'username') out.push(`${field}=${lines[i + 2]}`);
  }
  return out;
}

describe('ACL at run time (issue 18)', () => {
  let direct: ValkeyNode;
  let backend: ValkeyNode;
  let proxy: RespoolProxy;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'respool-acl-'));

  beforeAll(async () => {
    [direct, backend] = await Promise.all([startStandalone(), startStandalone()]);
    proxy = await startTestProxy([backend]);
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
    await Promise.all([direct?.stop(), backend?.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('SETUSER / GETUSER / DELUSER apply to new and existing connections, and ACL LOG records the denials', async () => {
    const run = async (port: number) => {
      const admin = await RawConnection.connect(port);
      const user = await RawConnection.connect(port);
      const sub = await RawConnection.connect(port);
      const out: string[] = [];
      const step = async (conn: RawConnection, name: string, ...args: string[]) => out.push(`${name}: ${args.join(' ')} → ${await conn.call(...args)}`);
      await step(admin, 'admin', 'ACL', 'LOG', 'RESET');
      await step(admin, 'admin', 'ACL', 'SETUSER', 'u1', 'on', '>p1', '~k:*', '+get', '+set');
      await step(user, 'user', 'AUTH', 'u1', 'wrong');
      await step(user, 'user', 'AUTH', 'u1', 'p1');
      await step(user, 'user', 'SET', 'k:1', 'v');
      await step(user, 'user', 'SET', 'other', 'x');
      await step(user, 'user', 'DEL', 'k:1');
      await step(user, 'user', 'ACL', 'WHOAMI');
      // Changed while `user` is connected: applies to it at once.
      await step(admin, 'admin', 'ACL', 'SETUSER', 'u1', '+del', '-set');
      await step(user, 'user', 'SET', 'k:1', 'w');
      await step(user, 'user', 'DEL', 'k:1');
      await step(admin, 'admin', 'ACL', 'GETUSER', 'u1');
      await step(admin, 'admin', 'ACL', 'GETUSER', 'nobody');
      await step(admin, 'admin', 'ACL', 'SETUSER', 'u1', 'bogus-rule');
      await step(admin, 'admin', 'ACL', 'SETUSER', 'bad name', 'on');
      await step(user, 'user', 'MULTI');
      await step(user, 'user', 'SET', 'k:2', 'x');
      await step(user, 'user', 'EXEC');
      out.push(...logSummary(await admin.call('ACL', 'LOG')).map((l) => `log: ${l}`));
      out.push(`log 1: ${logSummary(await admin.call('ACL', 'LOG', '1')).join(' ')}`);
      await step(admin, 'admin', 'ACL', 'LOG', 'x');
      await step(admin, 'admin', 'ACL', 'LOG', '1', '2');
      // A subscriber whose channel is revoked is disconnected.
      await step(admin, 'admin', 'ACL', 'SETUSER', 'u2', 'on', 'nopass', 'resetchannels', '&news:*', '+@pubsub');
      await step(sub, 'sub', 'AUTH', 'u2', 'x');
      await step(sub, 'sub', 'SUBSCRIBE', 'news:1');
      await step(admin, 'admin', 'ACL', 'SETUSER', 'u2', 'resetchannels', '&other');
      await sub.waitClosed();
      out.push('sub: closed');
      // A deleted user's connections are closed.
      await step(admin, 'admin', 'ACL', 'DELUSER', 'u1', 'u2', 'nobody');
      await user.waitClosed();
      out.push('user: closed');
      await step(admin, 'admin', 'ACL', 'DELUSER', 'default');
      await step(admin, 'admin', 'ACL', 'LOG', 'RESET');
      await step(admin, 'admin', 'ACL', 'LOG');
      admin.close();
      return out;
    };
    expect(await run(proxy.address.port)).toEqual(await run(direct.port));
    // Denials are counted by user and reason.
    expect(await proxy.metrics.render()).toMatch(/respool_acl_denials_total\{user="u1",reason="key"\} [1-9]/);
  }, 30_000);

  it('ACL SAVE writes the users file, ACL LOAD reads it whole or not at all, SIGHUP reads it too', async () => {
    const file = path.join(dir, 'users.acl');
    fs.writeFileSync(file, 'user default on nopass sanitize-payload ~* &* +@all\nuser f1 on >f1pw ~f:* &* -@all +get\n');
    const base = JSON.parse(JSON.stringify(proxy.config)) as RespoolConfig;
    const withFile = await startTestProxy([backend], { acl: { ...base.acl, file } } as Partial<RespoolConfig>);
    try {
      const c = await RawConnection.connect(withFile.address.port);
      expect(await c.call('ACL', 'USERS')).toBe('*2\r\n$7\r\ndefault\r\n$2\r\nf1\r\n');
      expect(await c.call('ACL', 'SETUSER', 'f2', 'on', '>f2pw', '~g:*', '+set')).toBe('+OK\r\n');
      expect(await c.call('ACL', 'SAVE')).toBe('+OK\r\n');
      const saved = fs.readFileSync(file, 'utf8');
      expect(saved).toMatch(/^user default on nopass sanitize-payload ~\* &\* \+@all\nuser f1 on sanitize-payload #[0-9a-f]{64} ~f:\* &\* -@all \+get\nuser f2 on sanitize-payload #[0-9a-f]{64} ~g:\* resetchannels -@all \+set\n$/);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      // Edited on disk, then LOAD: f2 is gone, f1 changed; a client of f2 is closed.
      const f2 = await RawConnection.connect(withFile.address.port);
      expect(await f2.call('AUTH', 'f2', 'f2pw')).toBe('+OK\r\n');
      fs.writeFileSync(file, 'user default on nopass sanitize-payload ~* &* +@all\nuser f1 on >f1pw ~f:* &* -@all +get +set\n');
      expect(await c.call('ACL', 'LOAD')).toBe('+OK\r\n');
      await f2.waitClosed();
      expect(await c.call('ACL', 'USERS')).toBe('*2\r\n$7\r\ndefault\r\n$2\r\nf1\r\n');
      // A bad file changes nothing, and says why as Valkey does.
      fs.writeFileSync(file, 'user f1 on +nosuchcommand\nnot a user line\n');
      const error = await c.call('ACL', 'LOAD');
      expect(error).toBe(`-ERR ${file}:1: Error in applying operation '+nosuchcommand': Unknown command or category name in ACL. ${file}:2 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n`);
      expect(await c.call('ACL', 'USERS')).toBe('*2\r\n$7\r\ndefault\r\n$2\r\nf1\r\n');
      // SIGHUP (proxy.reload) reads the file again.
      fs.writeFileSync(file, 'user default on nopass sanitize-payload ~* &* +@all\nuser f3 on nopass ~* &* +@all\n');
      expect(withFile.reload(JSON.parse(JSON.stringify(withFile.config)) as RespoolConfig).failed).toEqual([]);
      expect(await c.call('ACL', 'USERS')).toBe('*2\r\n$7\r\ndefault\r\n$2\r\nf3\r\n');
      c.close();
    } finally {
      await withFile.close();
    }
    // Without a file: Valkey's own refusal.
    const c = await RawConnection.connect(proxy.address.port);
    const d = await RawConnection.connect(direct.port);
    for (const cmd of [['ACL', 'SAVE'], ['ACL', 'LOAD']]) expect(await c.call(...cmd)).toBe(await d.call(...cmd));
    c.close();
    d.close();
  }, 30_000);
});
