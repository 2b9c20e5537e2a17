/**
 * A script's command count from the node's CLIENT INFO before and after it
 * (src/scripts/command-count-probe.ts): the arithmetic, both reply shapes, and what it does not know.
 */
import { describe, expect, it } from 'vitest';
import { CommandCountProbe, totCmds } from '../../src/scripts/command-count-probe.js';

const link = { address: '127.0.0.1:6379' };
const info = (n: number, verbatim = false): Buffer => {
  const line = `id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name= age=1 idle=0 flags=N db=0 cmd=client|info user=default tot-net-in=1 tot-net-out=2 tot-cmds=${n}\n`;
  return Buffer.from(verbatim ? `=${line.length + 4}\r\ntxt:${line}\r\n` : `$${line.length}\r\n${line}\r\n`);
};

describe('the node\'s count around a script', () => {
  it('reads tot-cmds from a RESP2 bulk and a RESP3 verbatim string; nothing from an error', () => {
    expect(totCmds(info(41))).toBe(41);
    expect(totCmds(info(41, true))).toBe(41);
    expect(totCmds(Buffer.from('-NOPERM this user has no permissions to run the \'client|info\' command\r\n'))).toBe(null);
  });

  it('the script\'s own commands: after − before − the first CLIENT INFO − the script (− ASKING between)', () => {
    const probe = new CommandCountProbe();
    probe.frames.before.req.onReply(info(10), link);
    expect(probe.isSettled).toBe(false);
    let settled = false;
    probe.whenSettled(() => (settled = true));
    probe.frames.after.req.onReply(info(15), link); // 10 + CLIENT INFO + EVAL + 3
    expect(settled).toBe(true);
    expect(probe.ran).toBe(3);
    const asked = new CommandCountProbe(1);
    asked.frames.before.req.onReply(info(10), link);
    asked.frames.after.req.onReply(info(14), link); // + ASKING
    expect(asked.ran).toBe(1);
  });

  it('a lost link or an error reply tells nothing, and settles it', () => {
    const lost = new CommandCountProbe();
    lost.frames.before.req.onReply(info(10), link);
    lost.frames.after.req.onLinkFailure('gone', true);
    expect(lost.isSettled).toBe(true);
    expect(lost.ran).toBe(null);
    const refused = new CommandCountProbe();
    refused.frames.before.req.onReply(Buffer.from('-NOPERM no\r\n'), link);
    refused.frames.after.req.onReply(Buffer.from('-NOPERM no\r\n'), link);
    expect(refused.ran).toBe(null);
  });
});
