import type { Metrics } from '../admin/metrics.js';
import type { ResilienceConfig } from '../config/types.js';
import { CircuitBreaker, CIRCUIT_STATE_VALUE } from './circuit-breaker.js';
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
  private readonly retryRefused: { inc(): void } | undefined;

  constructor(
    readonly address: string,
    config: ResilienceConfig,
    metrics?: Metrics,
  ) {
    const raw = metrics?.raw;
    const stateGauge = raw?.circuit_state.labels(address);
    const opens = raw?.circuit_opens_total.labels(address);
    const dialDeferred = raw?.dial_budget_exhausted_total.labels(address);
    this.retryRefused = raw?.retry_budget_exhausted_total.labels(address);
    stateGauge?.set(0);
    this.circuit = new CircuitBreaker({
      threshold: config.circuitFailureThreshold,
      backoffBaseMs: config.backoffBaseMs,
      backoffCapMs: config.backoffCapMs,
      dialAttemptsPerWindow: config.dialAttemptsPerWindow,
      dialWindowMs: config.dialWindowMs,
      onStateChange: (state) => {
        stateGauge?.set(CIRCUIT_STATE_VALUE[state]);
        if (state === 'open') opens?.inc();
      },
      onBudgetExhausted: () => dialDeferred?.inc(),
    });
    this.retryBudget = new RetryBudget(config.retryBudgetPercent, config.retryBudgetMinPerSecond);
  }

  /** Takes a retry token; false (and counted) when the node's budget is spent. */
  tryRetry(now: number = Date.now()): boolean {
    if (this.retryBudget.tryWithdraw(now)) return true;
    this.retryRefused?.inc();
    return false;
  }
}
