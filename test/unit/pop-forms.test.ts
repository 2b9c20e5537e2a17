/**
 * A blocking pop's non-blocking form over one key and its reply in the blocking command's shape
 * (src/parking/pop-forms.ts). The replies below are what valkey-server 8.0.1 sends: the
 * integration tests (blocking.test.ts, parked path) compare whole exchanges with Valkey.
 */
import { describe, expect, it } from 'vitest';
import { moveDestination, popForm, popsFromLeft, requestArgs } from '../../src/parking/pop-forms.js';

const b = (...xs: string[]) => xs.map((x) => Buffer.from(x));
const text = (buf: Buffer | null) => (buf === null ? null : buf.toString('latin1'));
const cmd = (...xs: string[]) => `*${xs.length}\r\n${xs.map((x) => `$${x.length}\r\n${x}\r\n`).join('')}`;

describe('pop forms', () => {
  it('BLPOP k1 k2 t over k2: LPOP k2; its value as [key, value]; nil, RESP3 null and errors kept as they mean', () => {
    const form = popForm('blpop', b('BLPOP', 'k1', 'k2', '5'))!;
    expect(text(form.command(Buffer.from('k2')))).toBe(cmd('LPOP', 'k2'));
    expect(text(form.reply(Buffer.from('$1\r\nv\r\n'), Buffer.from('k2')))).toBe('*2\r\n$2\r\nk2\r\n$1\r\nv\r\n');
    expect(form.reply(Buffer.from('$-1\r\n'), Buffer.from('k2'))).toBeNull();
    expect(form.reply(Buffer.from('_\r\n'), Buffer.from('k2'))).toBeNull();
    expect(text(form.reply(Buffer.from('-WRONGTYPE x\r\n'), Buffer.from('k2')))).toBe('-WRONGTYPE x\r\n');
  });

  it('BLMOVE and BRPOPLPUSH: LMOVE and RPOPLPUSH with the same ends, the reply as it is', () => {
    expect(text(popForm('blmove', b('BLMOVE', 's', 'd', 'LEFT', 'RIGHT', '0'))!.command(Buffer.from('s')))).toBe(cmd('LMOVE', 's', 'd', 'LEFT', 'RIGHT'));
    const rpl = popForm('brpoplpush', b('BRPOPLPUSH', 's', 'd', '0'))!;
    expect(text(rpl.command(Buffer.from('s')))).toBe(cmd('RPOPLPUSH', 's', 'd'));
    expect(text(rpl.reply(Buffer.from('$1\r\nx\r\n'), Buffer.from('s')))).toBe('$1\r\nx\r\n');
    expect(rpl.reply(Buffer.from('$-1\r\n'), Buffer.from('s'))).toBeNull();
  });

  it('BLMPOP / BZMPOP: one key, the direction and COUNT kept', () => {
    expect(text(popForm('blmpop', b('BLMPOP', '0', '2', 'a', 'b', 'RIGHT', 'COUNT', '3'))!.command(Buffer.from('b')))).toBe(cmd('LMPOP', '1', 'b', 'RIGHT', 'COUNT', '3'));
    const z = popForm('bzmpop', b('BZMPOP', '1.5', '1', 'z', 'MAX'))!;
    expect(text(z.command(Buffer.from('z')))).toBe(cmd('ZMPOP', '1', 'z', 'MAX'));
    expect(z.reply(Buffer.from('*-1\r\n'), Buffer.from('z'))).toBeNull();
  });

  it('BZPOPMIN / BZPOPMAX: ZPOPMIN / ZPOPMAX; [member, score] as [key, member, score] in RESP2 and RESP3; the empty array is nothing', () => {
    const form = popForm('bzpopmin', b('BZPOPMIN', 'zz', '0'))!;
    expect(text(form.command(Buffer.from('zz')))).toBe(cmd('ZPOPMIN', 'zz'));
    expect(text(form.reply(Buffer.from('*2\r\n$1\r\na\r\n$3\r\n1.5\r\n'), Buffer.from('zz')))).toBe('*3\r\n$2\r\nzz\r\n$1\r\na\r\n$3\r\n1.5\r\n');
    expect(text(form.reply(Buffer.from('*2\r\n$1\r\na\r\n,1.5\r\n'), Buffer.from('zz')))).toBe('*3\r\n$2\r\nzz\r\n$1\r\na\r\n,1.5\r\n');
    expect(form.reply(Buffer.from('*0\r\n'), Buffer.from('zz'))).toBeNull();
    expect(text(popForm('bzpopmax', b('BZPOPMAX', 'zz', '0'))!.command(Buffer.from('zz')))).toBe(cmd('ZPOPMAX', 'zz'));
  });

  it("a request's arguments read back from its bytes; a move's destination; which end a pop took from", () => {
    const args = requestArgs(Buffer.from(cmd('BLMPOP', '0', '2', 'a', 'b', 'LEFT', 'COUNT', '2')));
    expect(args.map(String)).toEqual(['BLMPOP', '0', '2', 'a', 'b', 'LEFT', 'COUNT', '2']);
    expect(popsFromLeft('blmpop', args)).toBe(true);
    expect(popsFromLeft('blmpop', requestArgs(Buffer.from(cmd('BLMPOP', '0', '1', 'a', 'RIGHT'))))).toBe(false);
    expect(popsFromLeft('blpop', [])).toBe(true);
    expect(String(moveDestination('blmove', requestArgs(Buffer.from(cmd('BLMOVE', 's', 'd', 'LEFT', 'LEFT', '0')))))).toBe('d');
    expect(moveDestination('blpop', args)).toBeNull();
  });

  it('another command has no form', () => {
    expect(popForm('xread', b('XREAD', 'BLOCK', '0', 'STREAMS', 's', '$'))).toBeNull();
  });
});
