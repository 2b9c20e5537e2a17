import { Backoff } from './backoff.js';
import { DialBudget } from './dial-budget.js';

/**
 * closed    : the node is healthy; links are dialed freely (one per empty pool place).
 * open      : `threshold` consecutive failures (failed dials, command timeouts): the node is
 *             treated as down. Requests wait at most resilience.queueWindowMs for a link, then
 *             fail with an error naming the node. After a jittered backoff, one probe dial.
 * half-open : that probe is in flight; its success closes the circuit, its failure reopens it
 *             with the next (longer) backoff.
 */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** Numeric form for the circuit_state gauge. */
export const CIRCUIT_STATE_VALUE: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. */
  threshold: number;
  backoffBaseMs: number;
  backoffCapMs: number;
  /** Dials to a failing node per window, whatever the number of links and pools. */
  dialAttemptsPerWindow: number;
  dialWindowMs: number;
  random?: () => number;
  onStateChange?: (state: CircuitState) => void;
  /** A dial was wanted but the window budget was spent. */
  onBudgetExhausted?: () => void;
  /** The node went from healthy to suspect (a link lost, a dial or command failed), or back. */
  onHealthChange?: (healthy: boolean, error: string) => void;
}

/**
 * The one gate that decides when a node may be dialed (one per node address, shared by every
 * pool and link to it: see NodeHealth).
 *
 *   healthy  : no failure since the last successful dial, and no link lost: dials are free.
 *   suspect  : a link was lost or a dial/command failed: from now on dials are PROBES — one at a
 *              time, no earlier than the backoff delay after the last failure, and each one
 *              taken from the DialBudget. Links that failed together therefore do not redial
 *              together: the first probe goes alone, and only its success lets the others dial.
 *   invariant: at most one probe in flight; at most budget.attempts probes per budget.windowMs.
 */
export class CircuitBreaker {
  state: CircuitState = 'closed';
  consecutiveFailures = 0;
  lastError = '';
  private suspect = false;
  private probing = false;
  private nextAttemptAt = 0;
  private readonly backoff: Backoff;
  readonly budget: DialBudget;
  private readonly random: () => number;

  constructor(private readonly options: CircuitBreakerOptions) {
    this.random = options.random ?? Math.random;
    this.backoff = new Backoff(options.backoffBaseMs, options.backoffCapMs, this.random);
    this.budget = new DialBudget(options.dialAttemptsPerWindow, options.dialWindowMs);
  }

  /** True while requests should not expect a link soon (open or probing after open). */
  get isOpen(): boolean {
    return this.state !== 'closed';
  }

  /** When the next probe may be dialed (ms, Date.now() clock); 0 when dials are free. */
  get nextDialAt(): number {
    return this.isHealthy ? 0 : this.nextAttemptAt;
  }

  get isHealthy(): boolean {
    return !this.suspect && this.consecutiveFailures === 0;
  }

  /**
   * May a connection be dialed now? When true the caller MUST report the outcome with
   * onDialSuccess() or onDialFailure().
   */
  tryAcquireDial(now: number = Date.now()): boolean {
    if (this.isHealthy) return true;
    if (this.probing || now < this.nextAttemptAt) return false;
    if (!this.budget.tryTake(now)) {
      // Spent: wait for the window to free an attempt, plus jitter so nodes do not sync up.
      const spacing = this.budget.windowMs / this.budget.attempts;
      this.nextAttemptAt = this.budget.nextAllowedAt(now) + Math.floor(this.random() * spacing);
      this.options.onBudgetExhausted?.();
      return false;
    }
    this.probing = true;
    if (this.state === 'open') this.setState('half-open');
    return true;
  }

  onDialSuccess(): void {
    const wasHealthy = this.isHealthy;
    this.probing = false;
    this.suspect = false;
    this.consecutiveFailures = 0;
    this.nextAttemptAt = 0;
    this.backoff.reset();
    if (this.state !== 'closed') this.setState('closed');
    if (!wasHealthy) this.options.onHealthChange?.(true, '');
  }

  /** A dial failed (refused, timed out, handshake error). */
  onDialFailure(error: string, now: number = Date.now()): void {
    this.probing = false;
    this.recordFailure(error, now);
  }

  /** A request timed out on an open link: the node may be a black hole. */
  onCommandTimeout(error: string, now: number = Date.now()): void {
    this.recordFailure(error, now);
  }

  /** A ready link was lost (closed by the node, reset): the next dial is a probe. */
  onLinkLost(error: string): void {
    const wasHealthy = this.isHealthy;
    this.lastError = error;
    this.suspect = true;
    if (wasHealthy) this.options.onHealthChange?.(false, error);
  }

  private recordFailure(error: string, now: number): void {
    if (this.isHealthy) {
      this.suspect = true;
      this.options.onHealthChange?.(false, error);
    }
    this.lastError = error;
    this.suspect = true;
    this.consecutiveFailures++;
    this.nextAttemptAt = now + this.backoff.nextDelayMs();
    if (this.consecutiveFailures >= this.options.threshold && this.state !== 'open') this.setState('open');
  }

  private setState(state: CircuitState): void {
    this.state = state;
    this.options.onStateChange?.(state);
  }
}
