/**
 * The admin HTTP server: /metrics, /healthz, /readyz, /topology, plus any route added later
 * through `registerRoute` (e.g. /hotkeys).
 *
 * Routing is a small table keyed by "METHOD path" (exact path match, query string ignored for
 * matching). A known path with another method answers 405 with an Allow header; an unknown path
 * answers 404. HEAD is served wherever GET is, without a body. A handler that throws or rejects
 * produces a 500 JSON reply; nothing escapes to the process.
 */
import { nodeCrypto } from '../util/lazy-builtins.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';

import { log } from '../util/logger.js';
import type { Metrics } from '../metrics/metrics.js';

export interface AdminState {
  /** Extra fields (which slots, which nodes) are sent in the 503 body as they are. */
  readiness(): { ready: boolean; reason?: string } & object;
  topology(): unknown;
}

/** What a route handler returns; the server writes it. */
export interface AdminResponse {
  status: number;
  /** Default "application/json; charset=utf-8" when `body` is not a string/Buffer, else "text/plain; charset=utf-8". */
  contentType?: string;
  headers?: Record<string, string>;
  /** A string or Buffer is sent as is; anything else is serialized as JSON (Maps, Sets and bigints included). */
  body?: unknown;
}

export interface AdminRequest {
  method: string;
  /** Parsed request URL (use `url.searchParams` for query parameters). */
  url: URL;
  /** The raw node request (headers; the body stream for non-GET routes). */
  raw: IncomingMessage;
}

export type AdminHandler = (req: AdminRequest) => AdminResponse | Promise<AdminResponse>;

export interface AdminRoute {
  method: string;
  path: string;
  handler: AdminHandler;
}

export interface AdminServerOptions {
  /** Extra routes, registered after the built-in ones (a same method+path replaces a built-in). */
  routes?: AdminRoute[];
  /** Called with errors thrown by handlers (the client gets a 500 either way). Default: log a warning. */
  onError?: (err: unknown, req: AdminRequest) => void;
  /**
   * The bearer token mutations (every method but GET and HEAD) must carry
   * (`Authorization: Bearer <token>`), read at each request so a reload can rotate it. With no
   * token (null, or no getter), mutations are refused with 403 and a body saying how to set one.
   * GET/HEAD routes (/metrics, /healthz, /readyz, /topology, /hotkeys) stay open.
   */
  token?: () => string | null;
  /**
   * The bearer token the GET/HEAD routes other than /metrics, /healthz and /readyz need when it
   * is set (admin.readToken); the admin token reads too. Null or absent: they are open.
   */
  readToken?: () => string | null;
}

/** Methods that only read: served without the admin token. */
const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/** Read routes that stay open whatever the read token: scrapers, probes, and the status page's files (no data: its JSON needs the token). */
const OPEN_PATHS: ReadonlySet<string> = new Set(['/metrics', '/healthz', '/readyz', '/', '/status.js', '/status.css']);

const NO_TOKEN_MESSAGE =
  'admin mutations are disabled: no admin token is configured. Set one with admin.token or '
  + 'admin.tokenFile in the config file, --admin-token-file, or the environment variable '
  + 'RESPOOL_ADMIN_TOKEN, then send it as "Authorization: Bearer <token>"';

/** Does the request carry the token? Constant time in the token's content (digests of equal length). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = header === undefined ? null : /^Bearer[ \t]+(\S+)\s*$/i.exec(header);
  const { createHash, timingSafeEqual } = nodeCrypto();
  const given = createHash('sha256').update(m?.[1] ?? '').digest();
  const wanted = createHash('sha256').update(token).digest();
  return timingSafeEqual(given, wanted) && m !== null;
}

/** True for 127.0.0.0/8, ::1, localhost: an address only this machine can reach. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

export interface AdminServer {
  server: Server;
  /** The address actually bound (the real port when 0 was asked for). */
  address: { host: string; port: number };
  /** Add or replace a route; takes effect for the next request. */
  registerRoute(method: string, path: string, handler: AdminHandler): void;
  /** Stop listening and close every open connection. */
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const TEXT_TYPE = 'text/plain; charset=utf-8';

/** JSON reply helper for handlers. */
export function jsonResponse(status: number, body: unknown, headers?: Record<string, string>): AdminResponse {
  return { status, contentType: JSON_TYPE, body, ...(headers ? { headers } : {}) };
}

/** JSON.stringify that also accepts Maps (→ objects), Sets (→ arrays) and bigints (→ strings). */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Map) {
      const obj: Record<string, unknown> = {};
      for (const [k, val] of v) obj[String(k)] = val;
      return obj;
    }
    if (v instanceof Set) return [...v];
    return v;
  });
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function startAdminServer(
  addr: { host: string; port: number },
  metrics: Metrics,
  state: AdminState,
  opts: AdminServerOptions = {},
): Promise<AdminServer> {
  /** path → method → handler */
  const routes = new Map<string, Map<string, AdminHandler>>();

  const registerRoute = (method: string, path: string, handler: AdminHandler): void => {
    if (!path.startsWith('/')) throw new Error(`admin route path must start with "/" (got ${JSON.stringify(path)})`);
    let byMethod = routes.get(path);
    if (byMethod === undefined) {
      byMethod = new Map();
      routes.set(path, byMethod);
    }
    byMethod.set(method.toUpperCase(), handler);
  };

  registerRoute('GET', '/metrics', async () => ({
    status: 200,
    contentType: metrics.contentType,
    body: await metrics.render(),
  }));
  registerRoute('GET', '/healthz', () => ({ status: 200, contentType: TEXT_TYPE, body: 'ok\n' }));
  registerRoute('GET', '/readyz', () => {
    const r = state.readiness();
    return r.ready
      ? jsonResponse(200, { ready: true })
      : jsonResponse(503, { ...r, ready: false, reason: r.reason ?? 'not ready' });
  });
  registerRoute('GET', '/topology', () => jsonResponse(200, state.topology()));
  for (const r of opts.routes ?? []) registerRoute(r.method, r.path, r.handler);

  const send = (res: ServerResponse, method: string, r: AdminResponse): void => {
    let body: string | Buffer;
    let type: string;
    if (typeof r.body === 'string' || Buffer.isBuffer(r.body)) {
      body = r.body;
      type = r.contentType ?? TEXT_TYPE;
    } else {
      body = r.body === undefined ? '' : toJson(r.body);
      type = r.contentType ?? JSON_TYPE;
    }
    const headers: Record<string, string | number> = {
      ...r.headers,
      'content-type': type,
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    };
    res.writeHead(r.status, headers);
    res.end(method === 'HEAD' ? undefined : body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = (req.method ?? 'GET').toUpperCase();
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin.invalid');
    } catch {
      send(res, method, jsonResponse(400, { error: 'bad request URL' }));
      return;
    }
    const byMethod = routes.get(url.pathname);
    if (byMethod === undefined) {
      send(res, method, jsonResponse(404, { error: 'not found', path: url.pathname }));
      return;
    }
    const handler = byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined);
    if (handler === undefined) {
      const allow = [...byMethod.keys()];
      if (byMethod.has('GET') && !byMethod.has('HEAD')) allow.push('HEAD');
      send(res, method, jsonResponse(405, { error: 'method not allowed', method, allow }, { allow: allow.join(', ') }));
      return;
    }
    if (READ_METHODS.has(method)) {
      const readToken = opts.readToken?.() ?? null;
      if (readToken !== null && readToken !== '' && !OPEN_PATHS.has(url.pathname)) {
        const token = opts.token?.() ?? null;
        const header = req.headers.authorization;
        if (!bearerMatches(header, readToken) && (token === null || token === '' || !bearerMatches(header, token))) {
          send(res, method, jsonResponse(401, { error: 'missing or wrong admin read token (send "Authorization: Bearer <token>")' }, { 'www-authenticate': 'Bearer realm="respool-admin"' }));
          return;
        }
      }
    } else {
      const token = opts.token?.() ?? null;
      if (token === null || token === '') {
        send(res, method, jsonResponse(403, { error: NO_TOKEN_MESSAGE }));
        return;
      }
      if (!bearerMatches(req.headers.authorization, token)) {
        send(res, method, jsonResponse(401, { error: 'missing or wrong admin token (send "Authorization: Bearer <token>")' }, { 'www-authenticate': 'Bearer realm="respool-admin"' }));
        return;
      }
    }
    const areq: AdminRequest = { method, url, raw: req };
    let reply: AdminResponse;
    try {
      reply = await handler(areq);
    } catch (err) {
      try {
        if (opts.onError) opts.onError(err, areq);
        else log.warn({ err, method, path: url.pathname }, 'admin handler failed');
      } catch {
        /* the error hook must not break the reply */
      }
      reply = jsonResponse(500, { error: errorMessage(err) });
    }
    try {
      send(res, method, reply);
    } catch (err) {
      // e.g. an unserializable body (cycle) or a bad status code from a handler
      if (!res.headersSent) send(res, method, jsonResponse(500, { error: errorMessage(err) }));
      else res.destroy();
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': JSON_TYPE });
        res.end('{"error":"internal error"}');
      } else {
        res.destroy();
      }
    });
  });
  // An admin endpoint should never hold sockets for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    // exclusive: in a worker process (src/workers) each admin server has a port of its own,
    // never one shared through the cluster primary.
    server.listen({ port: addr.port, host: addr.host, exclusive: true }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  // Errors after listen (rare: EMFILE on accept) must not crash the process.
  server.on('error', (err) => log.warn({ err }, 'admin server error'));

  const bound = server.address() as AddressInfo;
  let closing: Promise<void> | null = null;

  return {
    server,
    address: { host: bound.address, port: bound.port },
    registerRoute,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
