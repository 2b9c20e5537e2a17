import { describe, expect, it } from 'vitest';
import { mirrorVerdict } from '../../src/upstream/identity-mirror.js';

/** acl.upstream auto asks ACL DRYRUN whether respool may manage ACL users on the nodes. */
describe('mirrorVerdict (ACL DRYRUN … ACL SETUSER)', () => {
  it('+OK allows; a reason or a denial error does not', () => {
    expect(mirrorVerdict(Buffer.from('+OK\r\n'))).toBe(true);
    expect(mirrorVerdict(Buffer.from("$62\r\nUser respool has no permissions to run the 'acl|setuser' command\r\n"))).toBe(false);
    expect(mirrorVerdict(Buffer.from("-NOPERM User respool has no permissions to run the 'acl|dryrun' command\r\n"))).toBe(false);
    expect(mirrorVerdict(Buffer.from("-ERR User 'respool' not found\r\n"))).toBe(false);
  });

  it('a node that cannot answer now (a script running, a load) says nothing: null', () => {
    // Seen in Valkey's suite: a 1 s busy script made the check answer BUSY, and every later user lost its mirrored identity.
    expect(mirrorVerdict(Buffer.from('-BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n'))).toBeNull();
    expect(mirrorVerdict(Buffer.from('-LOADING Valkey is loading the dataset in memory\r\n'))).toBeNull();
  });
});
