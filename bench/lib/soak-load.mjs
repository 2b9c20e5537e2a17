// The load process of bench/soak.mjs, forked with an IPC channel (argv[2]: JSON { ports, runId,
// rate, outFile }): writes the reference keys, starts the sessions of soak-modes.mjs, sends
// { type: 'ready' } and then { type: 'progress', … } every 2 s. On { type: 'stop' }: the
// writers stop, the consumers drain the queues, then every acknowledged write is read back
// through member A, the BLPOP items and pub/sub messages are counted, and the result is written
// to outFile ({ type: 'result' } follows). Apart from the load, so that the bench's own loop
// (the fault relay, the sampler) is not slowed by it.
import fs from 'node:fs';
import { Ledger } from './soak-ledger.mjs';
import { QUEUES, REF_KEYS, connect, refKey, refValue, startModes } from './soak-modes.mjs';

const { ports, runId, rate, outFile } = JSON.parse(process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ledger = new Ledger(runId);
const ctx = { ledger, ports, rate, writing: true, consuming: true };
const queueKeys = Array.from({ length: QUEUES }, (_, q) => `sk:q:{${q}}`);

async function retried(what, fn, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: ${e.message}`);
      await sleep(200);
    }
  }
}

async function setup() {
  const c = connect(ports[0]);
  const acked = ledger.family('ref', 'mget', refKey, (i) => refValue(runId, i));
  for (let i = 0; i < REF_KEYS; i++) {
    await retried(`SET ${refKey(i)}`, async () => {
      if ((await c.set(refKey(i), refValue(runId, i))) !== 'OK') throw new Error('not OK');
    });
    acked.set(i, ledger.stamp());
  }
  c.disconnect();
}

/** Reads back every acknowledged write (GETs pipelined by 500; errors retried for up to 30 s). */
async function readBack(reader) {
  const out = { checked: 0, lost: 0, mismatched: 0, unreadable: 0, lostAt: [], examples: [] };
  for (const f of ledger.families) {
    const ns = [];
    for (let n = 0; n < f.acked.length; n++) if (f.acked.get(n)) ns.push(n);
    for (let i = 0; i < ns.length; i += 500) {
      let pending = ns.slice(i, i + 500);
      for (let attempt = 0; pending.length > 0 && attempt < 30; attempt++) {
        if (attempt > 0) await sleep(1000);
        const pipe = reader.pipeline();
        for (const n of pending) pipe.get(f.keyOf(n));
        let res;
        try {
          res = await pipe.exec();
        } catch {
          continue;
        }
        const again = [];
        res.forEach(([err, value], j) => {
          const n = pending[j];
          if (err) return again.push(n);
          out.checked++;
          if (value === f.valueOf(n)) return;
          const what = value === null ? 'lost' : 'mismatched';
          out[what]++;
          if (out.lostAt.length < 20_000) out.lostAt.push(ledger.at(f.acked.get(n)));
          if (out.examples.length < 30) out.examples.push(`${what}: ${f.keyOf(n)} (${f.mode}) acknowledged at ${new Date(ledger.at(f.acked.get(n))).toISOString()} → ${value}`);
        });
        pending = again;
      }
      out.unreadable += pending.length;
    }
  }
  return out;
}

/** Each acknowledged LPUSH's item popped exactly once? (`left`: items still in the queues.) */
function countItems(left) {
  const { pushed, pushFailed, popped } = ctx.queues;
  const out = { pushed: 0, poppedOnce: 0, missing: 0, duplicated: 0, fromFailedPush: 0, phantom: 0, leftInQueues: left.length, missingAt: [] };
  for (const item of left) {
    const [p, n] = item.split(':').map(Number);
    popped[p].inc(n);
  }
  for (let p = 0; p < pushed.length; p++) {
    for (let n = 0; n < Math.max(pushed[p].length, popped[p].length); n++) {
      const stamp = pushed[p].get(n);
      const pops = popped[p].get(n);
      if (pops > 1) out.duplicated++;
      if (stamp) {
        out.pushed++;
        if (pops === 1) out.poppedOnce++;
        if (pops === 0) {
          out.missing++;
          if (out.missingAt.length < 20_000) out.missingAt.push(ledger.at(stamp));
        }
      } else if (pops > 0) {
        if (pushFailed[p].has(n)) out.fromFailedPush++;
        else out.phantom++;
      }
    }
  }
  return out;
}

/** Each acknowledged PUBLISH received once by every subscriber? */
function countMessages() {
  const { received, published } = ctx.pubsub;
  const out = { published: 0, subscribers: received.length, delivered: 0, missing: 0, duplicated: 0, ofFailedPublish: 0, missingAt: [] };
  for (let n = 0; n < Math.max(published.length, ...received.map((r) => r.length)); n++) {
    const stamp = published.get(n);
    if (stamp) out.published++;
    for (const r of received) {
      const c = r.get(n);
      if (c > 1) out.duplicated++;
      if (!stamp) {
        if (c > 0) out.ofFailedPublish++;
        continue;
      }
      if (c >= 1) out.delivered++;
      else {
        out.missing++;
        if (out.missingAt.length < 20_000) out.missingAt.push(ledger.at(stamp));
      }
    }
  }
  return out;
}

async function finish(modes) {
  ctx.writing = false;
  await Promise.all(modes.writers);
  const checker = connect(ports[0]);
  const drainStart = Date.now();
  while (Date.now() - drainStart < 60_000) {
    const lens = await Promise.all(queueKeys.map((k) => checker.llen(k))).catch(() => null);
    if (lens && lens.every((l) => l === 0)) break;
    await sleep(500);
  }
  await sleep(2000); // pops and pub/sub deliveries on their way
  ctx.consuming = false;
  await Promise.all(modes.readers);
  const left = (await retried('LRANGE', () => Promise.all(queueKeys.map((k) => checker.lrange(k, 0, -1))))).flat();
  for (const c of modes.clients) c.disconnect();
  const readBackResult = await readBack(checker);
  checker.disconnect();
  const result = {
    t0: ledger.t0, ops: ledger.ops, errorCount: ledger.errorCount, errors: ledger.errors,
    mismatchCount: ledger.mismatchCount, mismatches: ledger.mismatches,
    readBack: readBackResult, items: countItems(left), messages: countMessages(),
  };
  fs.writeFileSync(outFile, JSON.stringify(result));
  process.send({ type: 'result' });
}

await setup();
const modes = startModes(ctx);
await retried('SUBSCRIBE', () => ctx.subscribed);
const progress = setInterval(() => process.send({ type: 'progress', ...ledger.progress() }), 2000);
process.on('message', (msg) => {
  if (msg?.type !== 'stop') return;
  clearInterval(progress);
  finish(modes).then(
    () => process.disconnect(),
    (e) => {
      process.send({ type: 'failed', message: e.stack ?? String(e) });
      process.disconnect();
    },
  );
});
process.on('disconnect', () => setTimeout(() => process.exit(0), 100).unref());
process.send({ type: 'ready' });
