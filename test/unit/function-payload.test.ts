import { describe, expect, it } from 'vitest';
import { crc64, functionPayload, libraryCodes, lzfDecompress, payloadVersion } from '../../src/keys/function-payload.js';
import { FunctionNames } from '../../src/keys/function-names.js';

describe('FUNCTION DUMP payloads (keys/function-payload.ts)', () => {
  it("computes Valkey's CRC-64 (crc64.c's check value)", () => {
    expect(crc64(Buffer.from('123456789')).toString(16)).toBe('e9c6d914c4b8d9ca');
  });

  it('reads back what it writes: codes, version, checksum', () => {
    const codes = [Buffer.from('#!lua name=a\nreturn 1'), Buffer.from(`#!lua name=b\n${'x'.repeat(20_000)}`)]; // 1- and 4-byte lengths
    const payload = functionPayload(codes, 11);
    expect(payloadVersion(payload)).toBe(11);
    expect(libraryCodes(payload, 11)).toEqual(codes);
    expect(libraryCodes(payload, 10)).toBe('DUMP payload version or checksum are wrong'); // newer than the node
    const bad = Buffer.from(payload);
    bad[3] ^= 1;
    expect(libraryCodes(bad, 11)).toBe('DUMP payload version or checksum are wrong');
    expect(libraryCodes(Buffer.from('bad_payload'), 11)).toBe('DUMP payload version or checksum are wrong');
  });

  it('decompresses LZF literals and back references (overlapping ones included)', () => {
    // "abcabcabcabc": 3 literals, then a reference 9 long, 3 back.
    const input = Buffer.from([0x02, 0x61, 0x62, 0x63, (7 << 5) | 0, 9 - 2 - 7, 0x02]);
    expect(lzfDecompress(input, 12).toString()).toBe('abcabcabcabc');
    expect(() => lzfDecompress(input, 11)).toThrow(RangeError);
  });
});

describe('FunctionNames (keys/function-names.ts)', () => {
  const names = new FunctionNames(Buffer.from('a:'));
  it('puts the marker before the library name and every name the code registers, and takes it off again', () => {
    const code = Buffer.from([
      '#!lua name=lib',
      "redis.register_function('f1', function() return 1 end)",
      'server.register_function("f2", function() return 2 end)',
      "redis.register_function{function_name = 'f3', callback = function() return 3 end}",
      "local s = 'register_function is a word'",
    ].join('\n'));
    const stored = names.storedCode(code).toString();
    expect(stored).toContain('#!lua name=ns613a__lib\n');
    expect(stored).toContain("register_function('ns613a__f1'");
    expect(stored).toContain('register_function("ns613a__f2"');
    expect(stored).toContain("function_name = 'ns613a__f3'");
    expect(stored).toContain("local s = 'register_function is a word'");
    expect(names.clientCode(Buffer.from(stored)).equals(code)).toBe(true);
    expect(names.clientError(Buffer.from("-ERR Library 'ns613a__lib' already exists\r\n")).toString()).toBe("-ERR Library 'lib' already exists\r\n");
  });
});
