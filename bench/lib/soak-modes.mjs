// The client sessions of bench/soak.mjs's load, each a paced loop with iovalkey connected to a
// respool member as to one standalone server (no client-side retry: maxRetriesPerRequest 0 and
// autoResendUnfulfilledCommands off, so every failure surfaces as an error; commands time out
// after 15 s, three times respool's own command timeout):
//
//   verified   SET a fresh key, then GET it: the value must be the one acknowledged
//   multi      MULTI SET a, SET b (another slot), GET of an earlier transaction's key EXEC
//   blpop      producers LPUSH unique items to a few queues; consumers BLPOP them (1 s timeout)
//   pubsub     one subscriber per member; a publisher alternating members, numbered messages
//   mget       MGET of 5 reference keys in different slots, values known
//   perRequest a new connection per request: connect, one SET (or GET of an acknowledged key), QUIT
//
// Every acknowledged write goes in the ledger (soak-ledger.mjs); a value that is not the one
// acknowledged is a mismatch, counted apart from errors.
import calculateSlot from 'cluster-key-slot';
import { Valkey } from 'iovalkey';
import { Grow } from './soak-ledger.mjs';

const HOST = '127.0.0.1';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const OPTIONS = {
  host: HOST,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  commandTimeout: 15_000,
  connectTimeout: 5000,
  retryStrategy: (times) => Math.min(50 * times, 1000),
};
/** After an error, a session waits this long before its next request (no hammering during a fault). */
const ERROR_PAUSE_MS = 100;
export const REF_KEYS = 200;
export const QUEUES = 4;

export function connect(port, extra = {}) {
  const c = new Valkey({ ...OPTIONS, port, ...extra });
  c.on('error', () => undefined); // connection errors: the commands that fail with them are counted
  return c;
}

/** Resolves when the next of `perSecond` iterations is due; after a stall it does not catch up in a burst. */
function pacer(perSecond) {
  const gap = 1000 / perSecond;
  let next = Date.now();
  return async () => {
    next += gap;
    const now = Date.now();
    if (next < now - 1000) next = now;
    if (next > now) await sleep(next - now);
  };
}

export const refKey = (i) => `sk:ref:{r${i}}`;
export const refValue = (runId, i) => `${runId}:ref${i}`;

/** The load's sessions; `ctx` = { ledger, ports, rate, writing (bool), consuming (bool) }. */
export function startModes(ctx) {
  const { ledger, ports, rate } = ctx;
  const runId = ledger.runId;
  const member = (i) => ports[i % ports.length];
  const writers = [];
  const readers = [];
  const clients = [];
  const client = (port, extra) => {
    const c = connect(port, extra);
    clients.push(c);
    return c;
  };
  const failed = async (mode, e) => {
    ledger.error(mode, e);
    await sleep(ERROR_PAUSE_MS);
  };

  // ---- verified SET then GET
  for (let w = 0; w < 8; w++) {
    const c = client(member(w));
    const acked = ledger.family(`v${w}`, 'verified', (n) => `sk:v:${w}:${n}`, (n) => `${runId}:v${w}:${n}`);
    const pace = pacer(100 * rate);
    writers.push((async () => {
      for (let n = 0; ctx.writing; n++) {
        await pace();
        const key = `sk:v:${w}:${n}`;
        const value = `${runId}:v${w}:${n}`;
        try {
          const r = await c.set(key, value);
          if (r !== 'OK') throw new Error(`SET answered ${r}`);
          acked.set(n, ledger.stamp());
          ledger.ok('verified');
          const got = await c.get(key);
          ledger.ok('verified');
          if (got !== value) ledger.mismatch('verified', `GET ${key} → ${got} after SET ${value} was acknowledged`);
        } catch (e) {
          await failed('verified', e);
        }
      }
    })());
  }

  // ---- MULTI … EXEC over keys in different slots
  for (let w = 0; w < 2; w++) {
    const c = client(member(w));
    const keyA = (n) => `sk:t:${w}:${n}:a`;
    const keyB = (n) => (calculateSlot(`sk:t:${w}:${n}:b`) === calculateSlot(keyA(n)) ? `sk:t:${w}:${n}:bb` : `sk:t:${w}:${n}:b`);
    const valueOf = (k) => (n) => `${runId}:t${w}:${n}:${k}`;
    const ackedA = ledger.family(`t${w}a`, 'multi', keyA, valueOf('a'));
    const ackedB = ledger.family(`t${w}b`, 'multi', keyB, valueOf('b'));
    const pace = pacer(15 * rate);
    writers.push((async () => {
      let prev = -1;
      for (let n = 0; ctx.writing; n++) {
        await pace();
        try {
          const tx = c.multi().set(keyA(n), valueOf('a')(n)).set(keyB(n), valueOf('b')(n));
          if (prev >= 0) tx.get(keyA(prev));
          const res = await tx.exec();
          if (!Array.isArray(res)) throw new Error(`EXEC answered ${res}`);
          if (!res[0][0] && res[0][1] === 'OK') ackedA.set(n, ledger.stamp());
          if (!res[1][0] && res[1][1] === 'OK') ackedB.set(n, ledger.stamp());
          if (prev >= 0 && !res[2][0] && res[2][1] !== valueOf('a')(prev)) {
            ledger.mismatch('multi', `GET ${keyA(prev)} in a transaction → ${res[2][1]} (acknowledged ${valueOf('a')(prev)})`);
          }
          const err = res.find(([e]) => e)?.[0];
          if (err) throw err;
          ledger.ok('multi');
          prev = n;
        } catch (e) {
          await failed('multi', e);
        }
      }
    })());
  }

  // ---- BLPOP consumers fed by LPUSH producers
  const pushed = [];
  const pushFailed = [];
  const popped = [];
  for (let p = 0; p < 2; p++) {
    const c = client(member(p));
    pushed[p] = new Grow(Uint32Array); // acknowledgement stamps, as the families'
    pushFailed[p] = new Map();
    popped[p] = new Grow(Uint8Array);
    const pace = pacer(20 * rate);
    writers.push((async () => {
      for (let n = 0; ctx.writing; n++) {
        await pace();
        try {
          const r = await c.lpush(`sk:q:{${n % QUEUES}}`, `${p}:${n}`);
          if (typeof r !== 'number') throw new Error(`LPUSH answered ${r}`);
          pushed[p].set(n, ledger.stamp());
          ledger.ok('blpop');
        } catch (e) {
          pushFailed[p].set(n, Date.now());
          await failed('blpop', e);
        }
      }
    })());
  }
  for (let q = 0; q < QUEUES; q++) {
    for (let m = 0; m < ports.length; m++) {
      const c = client(ports[m]);
      readers.push((async () => {
        while (ctx.consuming) {
          try {
            const r = await c.blpop(`sk:q:{${q}}`, 1);
            ledger.ok('blpop');
            if (r === null) continue;
            const [p, n] = r[1].split(':').map(Number);
            popped[p].inc(n);
          } catch (e) {
            await failed('blpop', e);
          }
        }
      })());
    }
  }
  ctx.queues = { pushed, pushFailed, popped };

  // ---- pub/sub: a subscriber per member, one publisher alternating members
  const received = ports.map(() => new Grow(Uint8Array));
  const published = new Grow(Uint32Array);
  const subscribers = ports.map((port, s) => {
    const c = client(port);
    c.on('message', (_channel, message) => received[s].inc(Number(message)));
    return c;
  });
  ctx.subscribed = Promise.all(subscribers.map((c) => c.subscribe('sk:events')));
  const publishers = ports.map((port) => client(port));
  writers.push((async () => {
    await ctx.subscribed;
    const pace = pacer(20 * rate);
    for (let n = 0; ctx.writing; n++) {
      await pace();
      try {
        const r = await publishers[n % publishers.length].publish('sk:events', String(n));
        if (typeof r !== 'number') throw new Error(`PUBLISH answered ${r}`);
        published.set(n, ledger.stamp());
        ledger.ok('pubsub');
      } catch (e) {
        await failed('pubsub', e);
      }
    }
  })());
  ctx.pubsub = { received, published, subscribers };

  // ---- MGET over keys in several slots, values known
  for (let w = 0; w < 2; w++) {
    const c = client(member(w));
    const pace = pacer(40 * rate);
    writers.push((async () => {
      while (ctx.writing) {
        await pace();
        const picks = new Set();
        while (picks.size < 5) picks.add(Math.floor(Math.random() * REF_KEYS));
        const idx = [...picks];
        try {
          const got = await c.mget(idx.map(refKey));
          ledger.ok('mget');
          idx.forEach((i, j) => {
            if (got[j] !== refValue(runId, i)) ledger.mismatch('mget', `MGET ${refKey(i)} → ${got[j]} (set to ${refValue(runId, i)})`);
          });
        } catch (e) {
          await failed('mget', e);
        }
      }
    })());
  }

  // ---- a connection per request
  for (let m = 0; m < ports.length; m++) {
    const keyOf = (n) => `sk:r:${m}:${n}`;
    const valueOf = (n) => `${runId}:r${m}:${n}`;
    const acked = ledger.family(`r${m}`, 'perRequest', keyOf, valueOf);
    const pace = pacer(10 * rate);
    writers.push((async () => {
      let last = -1;
      for (let n = 0; ctx.writing; n++) {
        await pace();
        const c = connect(ports[m], { lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false });
        try {
          await c.connect();
          if (n % 2 === 0 || last < 0) {
            const r = await c.set(keyOf(n), valueOf(n));
            if (r !== 'OK') throw new Error(`SET answered ${r}`);
            acked.set(n, ledger.stamp());
            last = n;
          } else {
            const got = await c.get(keyOf(last));
            if (got !== valueOf(last)) ledger.mismatch('perRequest', `GET ${keyOf(last)} → ${got} (acknowledged ${valueOf(last)})`);
          }
          ledger.ok('perRequest');
          await c.quit();
        } catch (e) {
          c.disconnect();
          await failed('perRequest', e);
        }
      }
    })());
  }

  return { writers, readers, clients };
}
