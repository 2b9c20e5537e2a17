import type { AdminRequest, AdminResponse } from './admin-server.js';
import type { HotKeys, SplitRuleInput } from '../hotkeys/hot-keys.js';
import type { SplitRuleKind } from '../hotkeys/split-key.js';

// The admin HTTP routes to look at and steer hot keys (the RESPOOL command does the same through
// respool itself: hotkeys/control.ts).

const JSON_TYPE = 'application/json; charset=utf-8';
const json = (status: number, body: unknown): AdminResponse => ({ status, contentType: JSON_TYPE, body });
const MAX_BODY = 64 * 1024;

/** A request's JSON body (at most 64 KiB; empty: {}); throws on a bad or oversize one. */
export async function readJsonBody(req: AdminRequest): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  return text === '' ? {} : JSON.parse(text);
}

function ruleFromQuery(url: URL): { text: string; kind?: SplitRuleKind } | null {
  for (const kind of ['key', 'prefix', 'pattern'] as const) {
    const v = url.searchParams.get(kind);
    if (v !== null) return { text: v, kind };
  }
  return null;
}

/**
 * Admin routes:
 *   GET    /hotkeys                      detection report + split rules and copies (JSON)
 *   POST   /hotkeys/split  {"key"|"prefix"|"pattern": "...", "copies": n?}   add (or change) a rule
 *   DELETE /hotkeys/split?key=...|prefix=...|pattern=...                     remove it; copies deleted, originals kept
 */
export function hotKeyRoutes(hotKeys: HotKeys): Array<{ method: string; path: string; handler: (req: AdminRequest) => Promise<AdminResponse> | AdminResponse }> {
  return [
    { method: 'GET', path: '/hotkeys', handler: () => json(200, hotKeys.report()) },
    {
      method: 'POST',
      path: '/hotkeys/split',
      handler: async (req) => {
        let body: unknown;
        try {
          body = await readJsonBody(req);
        } catch (err) {
          return json(400, { error: `body must be JSON: ${(err as Error).message}` });
        }
        if (body === null || typeof body !== 'object' || Array.isArray(body)) {
          return json(400, { error: 'body must be a JSON object like {"key": "k", "copies": 3}' });
        }
        const b = body as Record<string, unknown>;
        const unknown = Object.keys(b).filter((k) => !['key', 'prefix', 'pattern', 'copies'].includes(k));
        if (unknown.length > 0) return json(400, { error: `unknown field(s): ${unknown.join(', ')}` });
        for (const k of ['key', 'prefix', 'pattern']) {
          if (b[k] !== undefined && typeof b[k] !== 'string') return json(400, { error: `${k} must be a string` });
        }
        if (b.copies !== undefined && b.copies !== null && typeof b.copies !== 'number') {
          return json(400, { error: 'copies must be a number or null' });
        }
        try {
          // In a fleet: once every member has the rule (and a key's copies were filled once).
          const { rule } = await hotKeys.split(b as SplitRuleInput);
          return json(200, { ok: true, rule: { [rule.kind]: rule.text, copies: rule.copies } });
        } catch (err) {
          return json(hotKeys.inFleet ? 409 : 400, { error: (err as Error).message });
        }
      },
    },
    {
      method: 'DELETE',
      path: '/hotkeys/split',
      handler: async (req) => {
        const which = ruleFromQuery(req.url);
        if (which === null) return json(400, { error: 'give ?key=, ?prefix= or ?pattern=' });
        let removed: boolean;
        try {
          removed = await hotKeys.removeRule(which.text, which.kind);
        } catch (err) {
          return json(409, { error: (err as Error).message });
        }
        return removed ? json(200, { ok: true }) : json(404, { error: `no split rule for ${which.kind} ${JSON.stringify(which.text)}` });
      },
    },
  ];
}
