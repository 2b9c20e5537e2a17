import type { Worker } from 'node:cluster';
import { COORDINATOR_INDEX, JOIN_ENV, MIGRATION_MESSAGE, type MigrationJoin, type MigrationMessage } from '../migration/migration-members.js';

/**
 * The supervisor's part in a live migration with workers (migration/migration-members.ts): it
 * passes each message on — to worker 0 (the coordinator), to every other worker (an op; the
 * coordinator is told how many got it, so it knows how many acks to wait for), or to one worker
 * (a reply) — stamped with the sender's index. It keeps what a worker started later must join:
 * the carry in force and where a cutover pointed the upstreams (joinEnv(), at fork).
 */
export class MigrationRelay {
  private readonly join: MigrationJoin = { carry: null, switched: null };

  constructor(private readonly workerAt: (index: number) => Worker | undefined, private readonly count: () => number) {}

  /** A migration message from worker `from`. */
  relay(from: number, msg: MigrationMessage): void {
    const stamped = { ...msg, from } as MigrationMessage;
    if (msg.to === 'coordinator' || typeof msg.to === 'number') {
      this.sendTo(msg.to === 'coordinator' ? COORDINATOR_INDEX : msg.to, stamped);
      return;
    }
    if (msg.kind !== 'op') return;
    const op = msg.op;
    if (op.op === 'carry') this.join.carry = op;
    if (op.op === 'stop') this.join.carry = null;
    if (op.op === 'switch') {
      this.join.switched = op.to;
      this.join.carry = null; // a switch ends the carry (migration-member.ts)
    }
    let sent = 0;
    for (let i = 0; i < this.count(); i++) {
      if (i === from || i === COORDINATOR_INDEX) continue;
      if (this.sendTo(i, stamped)) sent++;
    }
    if (msg.seq !== 0) this.sendTo(from, { type: MIGRATION_MESSAGE, to: from, kind: 'sent', seq: msg.seq, count: sent });
  }

  /** The environment a worker forked now starts with: what it joins. */
  joinEnv(index: number): Record<string, string> {
    const join: MigrationJoin = { carry: index === COORDINATOR_INDEX ? null : this.join.carry, switched: this.join.switched };
    return join.carry === null && join.switched === null ? {} : { [JOIN_ENV]: JSON.stringify(join) };
  }

  private sendTo(index: number, msg: MigrationMessage): boolean {
    const worker = this.workerAt(index);
    if (worker === undefined || worker.isDead() || !worker.isConnected()) return false;
    worker.send(msg);
    return true;
  }
}
