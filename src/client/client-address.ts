import type { Socket } from 'node:net';
import type { HandlerSession } from './handler-session.js';

// A client's addresses as Valkey shows them (CLIENT LIST addr= / laddr=, MONITOR, SLOWLOG).

/** What the line needs of a session (ClientSession; its socket gives addresses and fd). */
export type ListedClient = Pick<HandlerSession, 'id' | 'state' | 'createdAt' | 'closed' | 'buffers'> & { readonly socket?: Socket };

/** Valkey's peer id: "ip:port", "[ipv6]:port". */
function peer(ip: string | undefined, port: number | undefined): string {
  if (ip === undefined) return '?:0';
  return ip.includes(':') ? `[${ip}]:${port ?? 0}` : `${ip}:${port ?? 0}`;
}

/** A Unix socket client's path (the session knows it: config.unixSocket), for "path:0" as Valkey shows it. */
type UnixAware = { readonly address?: string; readonly localAddress?: string };

export function clientAddr(c: ListedClient): string {
  if (c.socket?.remoteAddress === undefined && (c as UnixAware).address !== undefined) return (c as UnixAware).address!;
  return peer(c.socket?.remoteAddress, c.socket?.remotePort);
}

export function clientLaddr(c: ListedClient): string {
  if (c.socket?.localAddress === undefined && (c as UnixAware).localAddress !== undefined) return (c as UnixAware).localAddress!;
  return peer(c.socket?.localAddress, c.socket?.localPort);
}

/** A session as SLOWLOG and COMMANDLOG name it (observe/request-observer.ts DescribeClient). */
export function describeClient(client: object): { addr: string; name: string } {
  const c = client as ListedClient;
  return { addr: clientAddr(c), name: c.state?.name ?? '' };
}
