// The one rule for following MOVED and ASK, whatever connection a request went on.
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { Metrics } from '../metrics/metrics.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { parseRedirect, parseRedirectText, type Redirect } from './redirect.js';

/** Where a MOVED / ASK sends a request next, or the error once it was redirected too often. */
export type RedirectStep =
  | { readonly kind: 'moved' | 'ask'; readonly slot: number; readonly host: string; readonly port: number }
  | { readonly kind: 'limit'; readonly error: Buffer };

/** Sent right before the request an ASK redirected, on the same connection (it holds for one command, or a whole MULTI). */
export const ASKING = encodeCommand(['ASKING']);

/** "host:port" → host. */
function hostOf(address: string): string {
  return address.slice(0, address.lastIndexOf(':'));
}

/**
 * Follows MOVED and ASK for every path a request takes to a node: shared links (routing/router.ts),
 * MULTI … EXEC blocks (transaction-block.ts), blocking commands on leases
 * (handlers/blocking-call.ts), shard subscriptions (pubsub/shard-subscribers.ts) and tracking
 * lanes (client/tracking-lanes.ts). The caller sends again where the step says; this decides:
 *
 *   hops    : a request redirected cluster.maxRedirects times gets the error instead (counted
 *             respool_command_errors_total{reason=redirect_limit})
 *   MOVED   : the slot's new owner goes into the current topology at once (copy on write) and
 *             a refresh is asked for — the refresher coalesces a storm of them into one run
 *   ASK     : the topology stays; the caller sends ASKING then the request on one connection
 *   host    : "MOVED 3999 :6381" (no host) means the replying node's host
 *   counted : respool_redirects_total{kind}, once per redirect followed or refused
 */
export class RedirectFollower {
  constructor(
    private readonly refresher: Pick<TopologyRefresher, 'current' | 'install' | 'requestRefresh'>,
    private readonly maxRedirects: number,
    private readonly metrics?: Pick<Metrics, 'redirectCounter' | 'commandErrorCounter'>,
  ) {}

  /**
   * The step for an error reply `frame` from `fromAddress` to a request redirected `hops` times
   * so far; null when the reply is no MOVED or ASK.
   */
  step(frame: Buffer, fromAddress: string, hops: number, command: string): RedirectStep | null {
    if (frame[0] !== 0x2d /* - */) return null;
    return this.stepFor(parseRedirect(frame), fromAddress, hops, command);
  }

  /** As step(), from an error's text without "-" (a subscriber connection's refusal). */
  stepForText(line: string, fromAddress: string, hops: number, command: string): RedirectStep | null {
    return this.stepFor(parseRedirectText(line), fromAddress, hops, command);
  }

  /** As step(), for a reply the caller parsed already (the router, which retries TRYAGAIN and LOADING too). */
  stepFor(redirect: Redirect | null, fromAddress: string, hops: number, command: string): RedirectStep | null {
    if (redirect === null || (redirect.kind !== 'moved' && redirect.kind !== 'ask')) return null;
    this.metrics?.redirectCounter(redirect.kind).inc();
    if (hops >= this.maxRedirects) return this.limit(command);
    const host = redirect.host || hostOf(fromAddress);
    if (redirect.kind === 'moved') this.movedTo(redirect.slot, host, redirect.port);
    return { kind: redirect.kind, slot: redirect.slot, host, port: redirect.port };
  }

  /**
   * A replica answered MOVED to a read (its slot moved, or it was promoted and demoted): the
   * read tries the strategy's next choice, within the same bound. Null: it may; else the error.
   */
  replicaMoved(hops: number, command: string): Buffer | null {
    this.metrics?.redirectCounter('moved').inc();
    this.refresher.requestRefresh('moved');
    return hops >= this.maxRedirects ? this.limit(command).error : null;
  }

  private limit(command: string): RedirectStep & { kind: 'limit' } {
    this.metrics?.commandErrorCounter(command, 'redirect_limit').inc();
    return { kind: 'limit', error: encodeError(ProxyError.tooManyRedirects(command.toUpperCase(), this.maxRedirects)) };
  }

  /** MOVED: the slot's new owner goes into the current topology now; a refresh is asked for. */
  private movedTo(slot: number, host: string, port: number): void {
    const current = this.refresher.current;
    if (current) this.refresher.install(current.withSlotOwner(slot, host, port), 'moved');
    this.refresher.requestRefresh('moved');
  }
}
