import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { applyPlan, planReload, reloadProxy } from '../../src/config/reload.js';

const base = () => ({ ...structuredClone(DEFAULT_CONFIG), upstreams: [{ host: '127.0.0.1', port: 7000 }] }) as RespoolConfig;

describe('config reload plan', () => {
  it('applies run-time settings in place (groups keep their identity) and lists restart-only ones', () => {
    const running = base();
    const { limits, reads, cluster } = running;
    const next = base();
    next.timeouts.commandMs = 9000;
    next.limits.maxPendingPerClient = 5;
    next.reads.strategy = 'preferReplica';
    next.cluster.maxRedirects = 2;
    next.logLevel = 'debug';
    next.users = [{ name: 'u', password: 'p' }] as RespoolConfig['users'];
    next.listen = { host: '0.0.0.0', port: 7777 };
    next.upstreams = [{ host: '10.0.0.1', port: 7000 }];
    next.connectionsPerNode = 8;
    next.cluster.refreshPeriodMs = 1000;
    next.resilience.circuitFailureThreshold = 9;
    next.resilience.maxInflightPerLink = 7;
    next.nearCache.keys = ['user:*'];
    next.nearCache.maxBytes = 1024;
    const plan = planReload(running, next);
    expect(plan.apply.sort()).toEqual(['cluster.maxRedirects', 'limits.maxPendingPerClient', 'logLevel', 'reads.strategy', 'resilience.maxInflightPerLink', 'timeouts.commandMs', 'users']);
    expect(plan.needsRestart.sort()).toEqual(['cluster.refreshPeriodMs', 'connectionsPerNode', 'listen', 'nearCache.keys', 'nearCache.maxBytes', 'resilience.circuitFailureThreshold', 'upstreams']);
    applyPlan(running, next, plan);
    expect(running.limits).toBe(limits);
    expect(running.reads).toBe(reads);
    expect(running.cluster).toBe(cluster);
    expect(running.timeouts.commandMs).toBe(9000);
    expect(running.limits.maxPendingPerClient).toBe(5);
    expect(running.reads.strategy).toBe('preferReplica');
    expect(running.users).toEqual([{ name: 'u', password: 'p' }]);
    expect(running.listen).toEqual(DEFAULT_CONFIG.listen); // kept
    expect(running.connectionsPerNode).toBe(2);
    expect(planReload(running, running).apply).toEqual([]);
  });

  it('reloadProxy: calls the setters of what changed, syncs split rules, keeps going when TLS fails', () => {
    const running = base();
    running.hotKeys.split = [{ key: 'a', copies: 3 }, { prefix: 'p:', copies: null }];
    const next = base();
    next.hotKeys.split = [{ key: 'a', copies: 2 }, { pattern: 'x*', copies: null }];
    next.timeouts.connectMs = 1234;
    next.logLevel = 'warn';
    const calls: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => calls.push(`log ${JSON.parse(l).event as string}`) });
    const result = reloadProxy({
      config: running,
      log,
      pools: { reconfigure: () => calls.push('pools') },
      reads: { reconfigure: () => calls.push('reads'), setOwnZone: () => calls.push('zone'), ownZone: null },
      hotKeys: {
        addRule: (r) => calls.push(`add ${JSON.stringify(r)}`),
        removeRule: async (text, kind) => {
          calls.push(`remove ${kind} ${text}`);
          return true;
        },
      },
      reloadTls: () => {
        throw new Error('bad certificate');
      },
    }, next);
    expect(calls).toEqual([
      'pools',
      'remove prefix p:',
      'add {"key":"a","copies":2}',
      'add {"pattern":"x*","copies":null}',
      'log reload_applied',
    ]);
    expect(log.level).toBe('warn');
    expect(result.failed).toEqual(['TLS certificates: bad certificate (the previous certificates stay in use)']);
  });
});
