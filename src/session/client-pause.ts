/** A session whose next request CLIENT PAUSE holds back (ClientSession). */
export interface PausedClient {
  /** The pause ended (or loosened): handle the held request, or hold it again. */
  resumeAfterPause(): void;
}

/**
 * CLIENT PAUSE over respool's own clients (Valkey 8.0.1 networking.c pauseClientsByClient,
 * pauseActions, updatePausedActions): one server-wide state that every ClientSession consults
 * before handling a request — one boolean (`active`) on the hot path.
 *
 *   pause   : the later end wins; ALL stays ALL when a WRITE pause comes while ALL is in force
 *   end     : a timer at the end time resumes the held clients, in the order they were held
 *   unpause : ends it at once
 */
export class ClientPause {
  /** True while a pause is in force. */
  active = false;
  /** ALL (every command) rather than WRITE (commands that may write or replicate). */
  all = false;
  /** When it ends (Date.now() ms). */
  private end = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly held = new Set<PausedClient>();

  /** CLIENT PAUSE `timeoutMs` [WRITE|ALL]. */
  pause(timeoutMs: number, all: boolean): void {
    const now = Date.now();
    if (this.end <= now) this.reset(); // an expired pause leaves nothing behind
    const wasAll = this.all;
    this.all = all || wasAll;
    if (timeoutMs > 0 && now + timeoutMs > this.end) this.end = now + timeoutMs;
    this.active = this.end > now;
    if (!this.active) {
      this.reset();
      return;
    }
    this.schedule();
    // A pause that got less restrictive would re-process the held clients (Valkey); ALL → WRITE never happens here.
  }

  /** CLIENT UNPAUSE. */
  unpause(): void {
    this.reset();
    this.resumeHeld();
  }

  hold(client: PausedClient): void {
    this.held.add(client);
  }

  /** The client went away while held. */
  forget(client: PausedClient): void {
    this.held.delete(client);
  }

  private schedule(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onTimer(), Math.max(1, this.end - Date.now()));
    this.timer.unref();
  }

  private onTimer(): void {
    this.timer = null;
    if (this.active && Date.now() < this.end) return this.schedule();
    this.reset();
    this.resumeHeld();
  }

  private reset(): void {
    this.active = false;
    this.all = false;
    this.end = 0;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private resumeHeld(): void {
    const held = [...this.held];
    this.held.clear();
    for (const client of held) client.resumeAfterPause();
  }
}
