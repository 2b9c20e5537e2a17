import { readFileSync } from 'node:fs';
import type { AdminRoute, AdminResponse } from './admin-server.js';
import { STATUS_PAGE_DIR } from '../own-files.js';

/**
 * The status page at `/` of the admin port: plain HTML, one stylesheet and one small script
 * (src/admin/status/), served as they are — no build step, nothing from elsewhere. The script
 * polls the admin port's JSON (/topology, /nodes, /latency, /saturation, /hotkeys, /bigkeys,
 * /slowlog, /events, and /fleet when it answers). It reads without a token; mutations it offers
 * (split a hot key, remove a split) carry the token the user types, which the admin server checks.
 *
 * The Content-Security-Policy holds the page to its own origin: no script, style, image or
 * connection anywhere else, no inline script or style, no framing.
 */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILES: ReadonlyArray<{ path: string; file: string; type: string }> = [
  { path: '/', file: 'status.html', type: 'text/html; charset=utf-8' },
  { path: '/status.js', file: 'status.js', type: 'text/javascript; charset=utf-8' },
  { path: '/status.css', file: 'status.css', type: 'text/css; charset=utf-8' },
];

export function statusPageRoutes(): AdminRoute[] {
  return FILES.map(({ path, file, type }) => {
    let body: Buffer | null = null; // read on first request, then kept
    return {
      method: 'GET',
      path,
      handler: (): AdminResponse => {
        body ??= readFileSync(new URL(file, STATUS_PAGE_DIR));
        return { status: 200, contentType: type, body, headers: { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff' } };
      },
    };
  });
}
