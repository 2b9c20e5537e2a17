// Certificate files → a TLS SecureContext, read fresh each time (start, config check, SIGHUP
// reload). Used by the client listener (server.ts) and the upstream dialer (upstream/dial.ts).

import { readFileSync } from 'node:fs';
import type tls from 'node:tls';
import { nodeTls } from './lazy-builtins.js';

interface TlsFiles {
  cert: string | null;
  key: string | null;
  ca: string | null;
  minVersion?: tls.SecureVersion;
  ciphers?: string | null;
}

/** SecureContext options with the files' contents (throws on an unreadable file). */
export function secureContextOptions(files: TlsFiles): tls.SecureContextOptions {
  const options: tls.SecureContextOptions = {};
  if (files.cert !== null) options.cert = readFileSync(files.cert);
  if (files.key !== null) options.key = readFileSync(files.key);
  if (files.ca !== null) options.ca = readFileSync(files.ca);
  if (files.minVersion !== undefined) options.minVersion = files.minVersion;
  if (files.ciphers !== undefined && files.ciphers !== null) options.ciphers = files.ciphers;
  return options;
}

/** A SecureContext from the files as they are now (throws when they do not parse or match). */
export function secureContextFor(files: TlsFiles): tls.SecureContext {
  return nodeTls().createSecureContext(secureContextOptions(files));
}
