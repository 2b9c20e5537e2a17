import type { Logger } from 'pino';
import type { UserDirectory } from '../acl/user-directory.js';
import { describeUser, splitRules } from '../acl/rules.js';
import type { FleetDoc, FleetState } from './fleet-state.js';

/**
 * The fleet's users changed at run time (ACL SETUSER / DELUSER / LOAD through any member), in the
 * fleet's shared state (fleet-state.ts), so that every member applies them within a beat and a
 * new or restarted member starts with them.
 *
 *   state   : doc.acl = { epoch, users: name → its ACL LIST description (password hashes, no
 *             plaintext) | null (deleted) }: the result of the changes, not a log of them, so
 *             it stays as small as the users are few
 *   LOAD    : bumps the epoch and empties `users`: every member loads its own acl.file again
 *             (each reads the file its config names) and drops the run-time overrides
 *   apply   : a member sets each user whose description differs from its own (`reset` + the
 *             description: the same user, hashes included) and deletes those marked null;
 *             its clients of a changed or deleted user are treated as Valkey treats them
 *   loops   : applying the state changes the local directory only; only a client's command
 *             shares a change (handlers/acl.ts)
 * The state lives in the upstream under respool's own hash tag, which clients may not touch
 * (routing/router.ts refuses keys under {respool-fleet}).
 */
export class FleetAcl {
  private epoch = 0;

  constructor(
    private readonly state: FleetState,
    private readonly users: UserDirectory,
    private readonly log: Logger,
  ) {
    state.onDoc((doc) => this.apply(doc));
  }

  /** After a client's ACL SETUSER / DELUSER / LOAD succeeded here: the fleet's state follows. */
  async share(args: readonly Buffer[]): Promise<void> {
    const sub = args[1]!.toString('latin1').toLowerCase();
    const names = sub === 'setuser' ? [args[2]!.toString()] : sub === 'deluser' ? args.slice(2).map((a) => a.toString()) : [];
    await this.state.update((doc) => {
      const acl = { epoch: doc.acl?.epoch ?? 0, users: { ...(doc.acl?.users ?? {}) } };
      if (sub === 'load') {
        acl.epoch++;
        acl.users = {};
        this.epoch = acl.epoch;
      } else {
        for (const name of names) {
          const user = this.users.get(name);
          acl.users[name] = user === undefined ? null : describeUser(user);
        }
      }
      return { ...doc, acl };
    });
  }

  private apply(doc: FleetDoc): void {
    const acl = doc.acl;
    if (acl === undefined) return;
    if (acl.epoch > this.epoch) {
      this.epoch = acl.epoch;
      const error = this.users.load(null);
      if (error !== null && !error.includes('not configured to use an ACL file')) this.log.error({ event: 'fleet_acl_load_failed', err: error.replace(/^ERR /, '') }, 'fleet: ACL LOAD made on another member failed here; the users stay as they were');
    }
    for (const [name, description] of Object.entries(acl.users)) {
      const current = this.users.get(name);
      if (description === null) {
        if (current !== undefined && name !== 'default') this.users.delUsers([name], null);
        continue;
      }
      if (current !== undefined && describeUser(current) === description) continue;
      const error = this.users.setUser(name, ['reset', ...splitRules(description)]);
      if (error !== null) this.log.error({ event: 'fleet_acl_apply_failed', user: name }, `fleet: user ${name} as another member set it does not apply here (its rules name something this member's command table lacks)`);
    }
  }
}
