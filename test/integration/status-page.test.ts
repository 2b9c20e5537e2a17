import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient, encodeCommand } from '../harness/raw-client.js';
import net from 'node:net';
import type { RespoolProxy } from '../../src/server.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

// The status page at / of the admin port, in a real browser: Debian's chromium, headless, driven
// by puppeteer-core (which downloads nothing), against respool in front of a running 3+3 cluster.
// The screenshot goes to .tmp/status-page.png; with RESPOOL_UPDATE_SCREENSHOT=1 to the one the
// README shows (docs/status-page.png).
const CHROMIUM = '/usr/bin/chromium';
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const SCREENSHOT = process.env['RESPOOL_UPDATE_SCREENSHOT'] === '1' ? join(repoRoot, 'docs/status-page.png') : join(repoRoot, '.tmp/status-page.png');
const TOKEN = 'status-page-test-token-0123456789';

let cluster: ValkeyCluster;
let proxy: RespoolProxy;
let browser: Browser;
let profile: string;
let base: string;
let load: RawClient;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-chromium.sh (npm run setup does)`);
  cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
  const seed = cluster.nodes[0]!;
  const hotKeys = structuredClone(DEFAULT_CONFIG.hotKeys);
  hotKeys.detection.sampleRate = 0.5;
  hotKeys.detection.windowMs = 1000;
  proxy = await startTestProxy([{ host: seed.host, port: seed.port }], {
    admin: { host: '127.0.0.1', port: 0 },
    adminToken: TOKEN,
    hotKeys,
    slowlog: { thresholdUs: 20_000, maxLen: 128 },
    saturation: { p99Ms: 10, cpuPercent: 90, cpuSampleMs: 500 },
    nearCache: { ...DEFAULT_CONFIG.nearCache, keys: ['page:cached:*'] },
    // A tenant (no user in it): every client is then the default tenant's, and the page has a tenants table.
    tenants: [{ name: 'shop', keyPrefix: 'shop:', upstream: null, limits: { opsPerSecond: 5000, bytesPerSecond: 50_000_000, maxClients: 500, maxInflight: null } }],
  });
  base = `http://127.0.0.1:${proxy.adminAddress!.port}`;
  load = await RawClient.connect(proxy.address.port);
  profile = mkdtempSync(join(tmpdir(), 'respool-chromium-'));
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`,
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  load?.close();
  await proxy?.close();
  await cluster?.stop();
});

/** Requests through respool, 20 at a time: GETs over many keys, a third of them on a hot one. */
async function traffic(n: number): Promise<void> {
  for (let i = 0; i < n; i += 20) {
    const calls: Array<Promise<unknown>> = [];
    for (let j = i; j < Math.min(n, i + 20); j++) calls.push(load.call('GET', j % 3 === 0 ? 'page:hot' : `page:k:${j}`));
    await Promise.all(calls);
  }
}

/** The text of every cell of a section's table, row by row. */
function cells(page: Page, id: string): Promise<string[][]> {
  return page.$$eval(`#${id} tbody tr`, (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')));
}

describe('the status page on the admin port', () => {
  it('shows every node, numbers that move under load, hot, split and big keys, the slow log, events; asks only the admin port', async () => {
    await load.call('SET', 'page:hot', 'v'.repeat(5000));
    await traffic(600);
    const page = await browser.newPage();
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    await page.setViewport({ width: 1500, height: 1100 });
    await page.goto(`${base}/?interval=400`, { waitUntil: 'load' });

    // every node of the topology, with its role and shard
    const nodes = [...(await cluster.primaries()), ...(await cluster.replicas())].map((n) => `${n.host}:${n.port}`);
    await waitFor(async () => (await cells(page, 'nodes')).length === 6, 'six node rows', 10_000, 100);
    const rows = await cells(page, 'nodes');
    expect(rows.map((r) => r[1]).sort()).toEqual([...nodes].sort());
    expect(rows.filter((r) => r[2] === 'primary')).toHaveLength(3);
    for (const r of rows) expect(r[13]).toBe('closed'); // circuits
    expect(await page.$eval('#summary', (e) => e.textContent)).toMatch(/^cluster, 3 shards, 16384 slots covered/);

    // numbers change under load: the keyed family's calls grow from one poll to the next
    const calls = async () => Number((await cells(page, 'families')).find((r) => r[0] === 'keyed')?.[1] ?? 0);
    await waitFor(async () => (await calls()) >= 600, 'the first requests on the page', 10_000, 100);
    const before = await calls();
    await traffic(900);
    await waitFor(async () => (await calls()) >= before + 900, 'the page to count the new requests', 10_000, 100);
    const perNode = (await cells(page, 'nodes')).filter((r) => r[2] === 'primary').map((r) => r[6]);
    for (const v of perNode) expect(v).toMatch(/\/s$/);

    // a request made slow on purpose reaches the slow-log tail with its node
    const hotOwner = await cluster.primaryForSlot(calculateSlot('page:hot'));
    const sleeper = await RawClient.connect(hotOwner.port);
    // A long head start (150 ms) inside a longer sleep: the node is asleep before the GET reaches
    // it even on a loaded machine, and the GET still waits far past the 20 ms threshold.
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '0.5');
    await sleep(150);
    await load.call('GET', 'page:hot');
    await sleeping;
    sleeper.close();
    // The hot-key report is per 1 s window: an idle window empties it (and the split buttons go
    // with its rows). Keep the hot key hot until the split is done, however slow the page is.
    let keepingHot = true;
    const keepHot = (async () => {
      while (keepingHot) {
        await traffic(60);
        await sleep(50);
      }
    })().catch(() => {}); // if the test fails before the split, afterAll's close ends the loop
    await waitFor(async () => (await cells(page, 'slowlog')).some((r) => r[5] === 'GET page:hot' && r[4] === `${hotOwner.host}:${hotOwner.port}`), 'the slow GET in the slow log', 10_000, 100);

    // hot keys and big keys from the sample; read-only: no buttons without the token
    await waitFor(async () => (await cells(page, 'hotkeys')).some((r) => r[0] === 'page:hot'), 'the hot key', 10_000, 100);
    await waitFor(async () => (await cells(page, 'bigkeys'))[0]?.[0] === 'page:hot', 'the big key', 10_000, 100);
    expect(await page.$$('#hotkeys button')).toHaveLength(0);
    expect(await page.$eval('#mode', (e) => e.textContent)).toBe('read-only');
    expect(await page.$eval('#events', (e) => e.textContent)).toContain('topology_changed');

    // the fleet's members (/fleet): this instance alone, alive, with every slot
    expect(await page.$eval('#fleet-section', (e) => (e as unknown as { hidden: boolean }).hidden)).toBe(false);
    await waitFor(async () => (await cells(page, 'fleet')).some((r) => r.includes('alive') && r.includes('16384')), 'this instance in the fleet table', 10_000, 100);
    // the tenants (/tenants): the configured one with its limits, and the default one, whose clients sent the traffic
    expect(await page.$eval('#tenants-section', (e) => (e as unknown as { hidden: boolean }).hidden)).toBe(false);
    await waitFor(async () => {
      const rows = await cells(page, 'tenants');
      return rows.some((r) => r[0] === 'shop' && r[1] === 'shop: · main' && r[2] === '0 of 500') && rows.some((r) => r[0] === 'default' && Number(r[5]) > 0 && /ms$/.test(r[10] ?? ''));
    }, 'the tenants table', 10_000, 100);
    // the near cache (/cache): its counters and the keys it holds
    expect(await page.$eval('#cache-section', (e) => (e as unknown as { hidden: boolean }).hidden)).toBe(false);
    await waitFor(async () => {
      for (let i = 0; i < 3; i++) await load.call('GET', 'page:cached:1');
      const rows = await cells(page, 'cache');
      const summary = await page.$eval('#cache-summary', (e) => e.textContent ?? '');
      return rows.some((r) => r[0] === 'page:cached:1') && /hit ratio [1-9]/.test(summary);
    }, 'the cached key on the page', 10_000, 100);
    // Every header is words, not a JSON field name; the page fits a 1400-pixel window.
    const headers = await page.$$eval('th', (ths) => ths.map((th) => th.textContent ?? ''));
    for (const h of headers) expect(h, 'a table header').not.toMatch(/[a-z][A-Z]|_/);
    await page.setViewport({ width: 1400, height: 1100 });
    expect(await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth)).toBeLessThanOrEqual(1400);
    await page.setViewport({ width: 1500, height: 1100 });

    // clients and buffers (/clients): a client that does not read its big replies holds output, on the bulk lane
    await load.call('SET', 'page:big', 'b'.repeat(1024 * 1024));
    const stuck = net.connect(proxy.address.port, '127.0.0.1');
    await new Promise((r) => stuck.once('connect', r));
    stuck.pause(); // it never reads
    stuck.write(Buffer.concat(Array.from({ length: 8 }, () => encodeCommand(['GET', 'page:big']))));
    await waitFor(async () => (await cells(page, 'clients-output')).some((r) => r[3] === 'bulk' && /MiB$/.test(r[5] ?? '')), 'the stuck client holding output', 10_000, 100);
    expect((await cells(page, 'buffers')).map((r) => r[0]).slice(0, 3)).toEqual(['interactive', 'bulk', 'links']);
    expect(await page.$eval('#clients-memory', (e) => e.textContent)).toMatch(/^limits\.maxMemory (off|[\d.]+ MiB) · [\d.]+ (B|KiB|MiB) buffered/);

    mkdirSync(join(repoRoot, SCREENSHOT.includes('/docs/') ? 'docs' : '.tmp'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(20_000);

    // with the token: split the hot key from the page
    await page.type('#token', TOKEN);
    await page.click('#token-form button');
    await waitFor(async () => (await page.$$('#hotkeys button')).length > 0, 'the split buttons', 10_000, 100);
    await page.$$eval('#hotkeys tbody tr', (trs) => {
      for (const tr of trs) if (tr.querySelector('td')?.textContent === 'page:hot') tr.querySelector('button')?.click();
    });
    await waitFor(async () => (await cells(page, 'splitkeys')).some((r) => r[0] === 'page:hot'), 'the split key on the page', 10_000, 100);
    expect(proxy.hotKeys.splitKeys().map((s) => s.id)).toContain('page:hot');
    keepingHot = false;
    await keepHot;
    stuck.destroy();

    // every request the page made went to the admin port
    const origin = new URL(base).origin;
    expect(requested.length).toBeGreaterThan(10);
    for (const url of requested) expect(url.startsWith(`${origin}/`), url).toBe(true);
    await page.close();
  });

  it('shows the fleet\'s members once /fleet answers', async () => {
    const page = await browser.newPage();
    await page.setRequestInterception(true);
    page.on('request', (r) => {
      if (new URL(r.url()).pathname === '/fleet') {
        void r.respond({ status: 200, contentType: 'application/json', body: JSON.stringify({ members: [{ address: '10.0.0.1:6380', ready: true }, { address: '10.0.0.2:6380', ready: false }] }) });
      } else {
        void r.continue();
      }
    });
    await page.goto(`${base}/?interval=400`, { waitUntil: 'load' });
    await waitFor(async () => !(await page.$eval('#fleet-section', (e) => (e as unknown as { hidden: boolean }).hidden)), 'the fleet section', 10_000, 100);
    expect((await cells(page, 'fleet')).map((r) => r[0]).map((a) => a.replace(' (this one)', ''))).toEqual(['10.0.0.1:6380', '10.0.0.2:6380']);
    await page.close();
  });
});
