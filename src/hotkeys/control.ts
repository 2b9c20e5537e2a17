import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { arityError, type ArityRule } from '../commands/command-table.js';

/** RESPOOL SPLIT ADD|ADDPREFIX|ADDPATTERN <text> [copies] and DEL <text>. */
const SPLIT_ADD: ArityRule = { name: 'respool|split', arity: -4 };
const SPLIT_DEL: ArityRule = { name: 'respool|split', arity: 4 };
import type { HotKeys } from './hot-keys.js';
import type { WindowReport } from './detector.js';

// The RESPOOL command a valkey-cli user sends through respool itself to look at and steer hot
// keys at run time (the admin HTTP routes that do the same: admin/hot-key-routes.ts).

export const HELP = [
  'RESPOOL HOTKEYS [COUNT n] [CURRENT]  -- top keys of the last detection window: key, requests/s, share, node (a fleet: the fleet\'s, and local_requests_per_sec)',
  'RESPOOL NODES [CURRENT]              -- each primary\'s share of keyed requests in the last window',
  'RESPOOL FLEET                        -- the fleet\'s members: state, last seen, slots, state version',
  'RESPOOL SPLIT ADD key [copies]       -- split a key into copies on distinct primaries (default one per primary)',
  'RESPOOL SPLIT ADDPREFIX prefix [copies]',
  'RESPOOL SPLIT ADDPATTERN glob [copies]',
  'RESPOOL SPLIT DEL key|prefix|glob    -- stop splitting; copies are deleted, the original stays',
  'RESPOOL SPLIT LIST                   -- split keys and where their copies are',
  'RESPOOL HELP',
];

const eqi = (b: Buffer | undefined, s: string) => b !== undefined && b.length === s.length && b.toString('latin1').toUpperCase() === s;

/** True when args[0] is RESPOOL (any case). Called only for commands the table does not know. */
export function isRespoolCommand(name: Buffer): boolean {
  return eqi(name, 'RESPOOL');
}

/**
 * Answers `RESPOOL ...` in the session, from the hot-key state. `merged`: the window report to
 * show for HOTKEYS / NODES instead of this process's (every worker's, src/workers). SPLIT ADD
 * (and DEL in a fleet) answer once the change is in force: a promise of the reply.
 */
export function runRespoolCommand(hotKeys: HotKeys | null, args: Buffer[], protocol: 2 | 3, merged?: WindowReport): Buffer | Promise<Buffer> {
  const bulk = (v: string | Buffer) => encodeBulk(v, protocol);
  if (hotKeys === null) return encodeError(ProxyError.hotKeysUnavailable());
  const sub = args[1]?.toString('latin1').toUpperCase();
  const fmt = (n: number) => (Math.round(n * 10000) / 10000).toString();
  switch (sub) {
    case undefined:
    case 'HELP':
      return encodeArray(HELP.map((l) => encodeSimple(l)));
    case 'HOTKEYS': {
      const det = hotKeys.detector;
      if (det === null) return encodeError(ProxyError.hotKeysOff());
      let count = det.options.topK;
      let current = false;
      for (let i = 2; i < args.length; i++) {
        if (eqi(args[i], 'COUNT') && i + 1 < args.length) {
          count = Number(args[++i]!.toString());
          if (!Number.isInteger(count) || count < 1) return encodeError(ProxyError.notAnInteger());
        } else if (eqi(args[i], 'CURRENT')) {
          current = true;
        } else {
          return encodeError(ProxyError.syntax());
        }
      }
      // A fleet: the fleet's last window (its rates; local_requests_per_sec this instance's own).
      const report = merged ?? (current ? hotKeys.currentWindow() : (hotKeys.fleetWindow() ?? hotKeys.lastWindow() ?? hotKeys.currentWindow()));
      return encodeArray(report.topKeys.slice(0, count).map((k) => encodeArray([
        bulk('key'), bulk(k.key),
        bulk('requests_per_sec'), bulk(fmt(k.requestsPerSecond)),
        bulk('share'), bulk(fmt(k.share)),
        bulk('node'), bulk(k.node),
        bulk('split'), encodeInteger(hotKeys.splitKey(k.key) ? 1 : 0),
        ...(k.localRequestsPerSecond !== undefined ? [bulk('local_requests_per_sec'), bulk(fmt(k.localRequestsPerSecond))] : []),
      ])));
    }
    case 'NODES': {
      if (hotKeys.detector === null) return encodeError(ProxyError.hotKeysOff());
      const current = eqi(args[2], 'CURRENT');
      const report = merged ?? (current ? hotKeys.currentWindow() : (hotKeys.fleetWindow() ?? hotKeys.lastWindow() ?? hotKeys.currentWindow()));
      return encodeArray(report.nodes.map((n) => encodeArray([
        bulk('node'), bulk(n.node), bulk('requests_per_sec'), bulk(fmt(n.requestsPerSecond)), bulk('share'), bulk(fmt(n.share)),
        ...(n.localRequestsPerSecond !== undefined ? [bulk('local_requests_per_sec'), bulk(fmt(n.localRequestsPerSecond))] : []),
      ])));
    }
    case 'SPLIT': {
      const op = args[2]?.toString('latin1').toUpperCase();
      if (op === 'LIST') {
        return encodeArray(hotKeys.splitKeys().map((s) => encodeArray([
          bulk(s.key),
          encodeArray(s.active.map((c) => bulk(`${c.name.toString('utf8')}@${c.node}`))),
        ])));
      }
      if (op === 'ADD' || op === 'ADDPREFIX' || op === 'ADDPATTERN') {
        const arity = arityError(SPLIT_ADD, args.length) ?? (args.length > 5 ? ProxyError.syntax() : null);
        if (arity !== null) return encodeError(arity);
        const text = args[3]!.toString('utf8');
        let copies: number | null = null;
        if (args.length === 5) {
          copies = Number(args[4]!.toString());
          if (!Number.isInteger(copies) || copies < 1) return encodeError(ProxyError.notAnInteger());
        }
        const kind = op === 'ADD' ? 'key' : op === 'ADDPREFIX' ? 'prefix' : 'pattern';
        const what = `${op} ${text}`;
        return hotKeys.split({ [kind]: text, copies }).then(
          () => encodeSimple('OK'),
          (err: Error) => encodeError(hotKeys.inFleet ? ProxyError.fleetSplitRefused(`RESPOOL SPLIT ${what}`, err.message) : ProxyError.respool(err.message)),
        );
      }
      if (op === 'DEL') {
        const arity = arityError(SPLIT_DEL, args.length);
        if (arity !== null) return encodeError(arity);
        const text = args[3]!.toString('utf8');
        const known = hotKeys.rules().some((r) => r.text === text);
        if (!known) return encodeInteger(0);
        // In a fleet: once no member reads the copies any more; here the copies go in the background.
        if (hotKeys.inFleet) {
          return hotKeys.removeRule(text).then(
            (removed) => encodeInteger(removed ? 1 : 0),
            (err: Error) => encodeError(ProxyError.fleetSplitRefused(`RESPOOL SPLIT DEL ${text}`, err.message)),
          );
        }
        void hotKeys.removeRule(text);
        return encodeInteger(1);
      }
      return encodeError(ProxyError.unknownSubcommand(args[2]?.toString() ?? '', 'RESPOOL SPLIT'));
    }
    default:
      return encodeError(ProxyError.unknownSubcommand(args[1]!.toString(), 'RESPOOL'));
  }
}
