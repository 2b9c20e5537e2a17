import type { Metrics } from '../metrics/metrics.js';
import type { ResilienceConfig } from '../config/types.js';
import { CircuitBreaker, CIRCUIT_STATE_VALUE } from './circuit-breaker.js';
import type { RateLimitedLog } from '../util/rate-limited-log.js';
import { RetryBudget } from './retry-budget.js';

/**
 * What respool knows about one upstream node address, shared by every pool (protocol, role) and
 * every link to it: its circuit (which also gates and budgets dials) and its retry budget.
 * One object per address, so "a dead node is dialed at most N times per window" holds whatever
 * the number of links, pools and clients.
 */
export class NodeHealth {
  readonly circuit: CircuitBreaker;
  readonly retryBudget: RetryBudget;
  /**
   * Commands the node may take its time over (SAVE, FLUSHALL …: router.ts
   * LONG_COMMANDS) in flight now: while one is, the node answers nobody, and its links wait
   * timeouts.adminCommandMs for it instead of timeouts.commandMs (Link's patience).
   */
  private readonly longCalls = new Set<{ readonly done: boolean }>();

  /** A long command was sent to the node; it counts until its `done`. */
  longCommandSent(call: { readonly done: boolean }): void {
    this.longCalls.add(call);
  }

  /** Whether a long command is in flight on the node now. */
  busyWithLongCommand(): boolean {
    for (const call of this.longCalls) if (call.done) this.longCalls.delete(call);
    return this.longCalls.size > 0;
  }
  private readonly retryRefused: { inc(): void } | undefined;

  constructor(
    readonly address: string,
    config: ResilienceConfig,
    metrics?: Metrics,
    private readonly events?: RateLimitedLog,
  ) {
    const raw = metrics?.raw;
    const stateGauge = raw?.circuit_state.labels(address);
    const opens = raw?.circuit_opens_total.labels(address);
    const dialDeferred = raw?.dial_budget_exhausted_total.labels(address);
    this.retryRefused = raw?.retry_budget_exhausted_total.labels(address);
    stateGauge?.set(0);
    metrics?.setCircuitStatus(address, 'closed');
    let previous: string = 'closed';
    let openedAt = 0; // when the circuit first opened (for circuit_closed's openForMs)
    let lostAt = 0; // when the node was lost (for node_back's downForMs)
    this.circuit = new CircuitBreaker({
      threshold: config.circuitFailureThreshold,
      backoffBaseMs: config.backoffBaseMs,
      backoffCapMs: config.backoffCapMs,
      dialAttemptsPerWindow: config.dialAttemptsPerWindow,
      dialWindowMs: config.dialWindowMs,
      onStateChange: (state) => {
        stateGauge?.set(CIRCUIT_STATE_VALUE[state]);
        metrics?.setCircuitStatus(address, state);
        if (state === 'open') opens?.inc();
        const c = this.circuit;
        // A failed probe turns half-open back to open: not news. Log the first opening only.
        const reopened = state === 'open' && previous === 'half-open';
        previous = state;
        if (reopened) return;
        if (state === 'open') {
          openedAt = Date.now();
          events?.emit('warn', 'circuit_open', address, { node: address, failures: c.consecutiveFailures, error: c.lastError }, `circuit to ${address} opened: it is treated as down`);
        } else if (state === 'closed') {
          events?.emit('info', 'circuit_closed', address, { node: address, openForMs: openedAt === 0 ? 0 : Date.now() - openedAt }, `circuit to ${address} closed`);
        }
      },
      onHealthChange: (healthy, error) => {
        if (healthy) {
          events?.emit('info', 'node_back', address, { node: address, downForMs: lostAt === 0 ? 0 : Date.now() - lostAt }, `node ${address} is reachable again`);
        } else {
          lostAt = Date.now();
          events?.emit('warn', 'node_lost', address, { node: address, error }, `node ${address} lost: ${error}`);
        }
      },
      onBudgetExhausted: () => dialDeferred?.inc(),
    });
    this.retryBudget = new RetryBudget(config.retryBudgetPercent, config.retryBudgetMinPerSecond);
  }

  /** A request to this node was shed at a bound (logged at most once a second per node and reason). */
  onShed(reason: string, detail: string): void {
    this.events?.emit('warn', 'load_shed', `${this.address}|${reason}`, { node: this.address, reason, detail }, `shedding load for ${this.address}: ${detail}`);
  }

  /** Takes a retry token; false (and counted) when the node's budget is spent. */
  tryRetry(now: number = Date.now()): boolean {
    if (this.retryBudget.tryWithdraw(now)) return true;
    this.retryRefused?.inc();
    return false;
  }
}
