import { FLAGS, UPSTREAM_PASSWORD_ENV } from './flags.js';
import { envHelp } from './env-config.js';

/** The --help text: every flag with its default, the config file, the exit codes. */
export function helpText(): string {
  const options = FLAGS.map((f) => {
    const names = `  ${f.short ? `-${f.short}, ` : ''}--${f.name}${f.value ? ` ${f.value}` : ''}`;
    const withDefault = f.default !== undefined ? `${names}  [default: ${f.default}]` : names;
    return `${withDefault}\n${wrap(f.help, 78, '        ')}`;
  }).join('\n');

  return `Usage: respool --upstream host:port[,host:port...] [options]

respool is a connection-pooling, cluster-aware RESP proxy for Valkey and Redis.

Options:
${options}

Values:
  host:port  IPv6 hosts in brackets: [::1]:6379
  SIZE       bytes, or with a unit as in valkey.conf: 64kb, 512mb, 1gb (powers of 1024),
             1k, 1m, 1g (powers of 1000)
  DURATION   milliseconds, or with a unit: 200ms, 5s, 2m, 1h

Environment:
  ${UPSTREAM_PASSWORD_ENV}  password for the upstream nodes, unless --upstream-password
                             is given; wins over the config file
  RESPOOL_ZONE               respool's availability zone when neither --zone nor
                             reads.zone is given
  RESPOOL_ADMIN_TOKEN        bearer token for admin POST/DELETE, unless --admin-token-file
                             is given; wins over admin.token in the config file

  Every setting of the config file can also come from the environment (no file needed):
  RESPOOL_ + its path, each camelCase word in UPPER_SNAKE_CASE, levels joined by "_"
  (timeouts.commandMs = RESPOOL_TIMEOUTS_COMMAND_MS). Values as in the file: 5s, 64mb,
  lists as a,b or [a, b], null as null. Flags win over the environment, the environment
  over the file, the file over the defaults. A bad value is an error naming the variable.
  SIGHUP reads the file, the environment and the flags again (see docs/operations.md).
${envHelp()}

Config file:
  --config file.yaml reads every setting, with the same camelCase names as the configuration
  (listen, listenTls, tls, upstreamTls, upstreams, mode, admin, connectionsPerNode, workers,
  supervised, upstreamAuth, users, limits, timeouts, cluster, resilience, clients, reads,
  hotKeys, logLevel); see config/sidecar.yaml
  and config/central-proxy.yaml. Some settings (users, upstreamAuth.passwordEnv,
  limits.maxArrayLength, cluster.retryBudget, ...) exist only in the file. Flags win over
  the file; the file wins over the defaults. Unknown keys are errors.

Proxy commands (send them to respool, e.g. with valkey-cli -p 6380):
  RESPOOL HOTKEYS [COUNT n] [CURRENT]      top keys of the last hot-key window: rate, share, node
  RESPOOL NODES [CURRENT]                  each primary's share of keyed requests
  RESPOOL SPLIT ADD key [copies]           keep key in copies on distinct primaries
  RESPOOL SPLIT ADDPREFIX|ADDPATTERN p [copies]
  RESPOOL SPLIT DEL key|prefix|pattern     stop splitting (copies deleted, original kept)
  RESPOOL SPLIT LIST                       split keys and their copies
  (admin HTTP: GET /hotkeys, POST /hotkeys/split, DELETE /hotkeys/split?key=...)

Exit codes:
  0  ok
  2  bad command line or config file (the message names the flag or field)
`;
}

/** Word-wraps `text` to `width` columns, each line starting with `indent`. */
function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(indent + line);
  return lines.join('\n');
}
