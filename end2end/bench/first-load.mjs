// The dashboard's first load and a repeat visit, in Chromium, on emulated
// links (Chrome DevTools Protocol `Network.emulateNetworkConditions`, the
// way Lighthouse throttles): when the server-rendered content is painted,
// when the page is hydrated and its live connection open, and the bytes on
// the wire. `make bench` runs this against the release server it started
// and reads one JSON object per line from standard output.
//
// Environment: BENCH_URL (the server), BENCH_TOKEN (an API token the
// browser sends as a bearer), BENCH_RUNS (loads per link; the median is
// reported), CHROMIUM (the browser, /usr/bin/chromium by default).
import { chromium } from '@playwright/test';

const base = process.env.BENCH_URL;
const token = process.env.BENCH_TOKEN;
const runs = Number(process.env.BENCH_RUNS ?? 3);
if (!base || !token) {
  console.error('usage: BENCH_URL=http://127.0.0.1:PORT BENCH_TOKEN=... node bench/first-load.mjs');
  process.exit(2);
}

// Throughput in bytes a second, latency in ms (round trip added to every request).
const links = [
  { name: 'loopback, no limit', conditions: null },
  {
    name: '10 Mbit/s, 40 ms',
    conditions: { latency: 40, downloadThroughput: (10e6 / 8), uploadThroughput: (10e6 / 8) },
  },
  {
    // Lighthouse's mobile profile ("slow 4G").
    name: '1.6 Mbit/s, 150 ms',
    conditions: { latency: 150, downloadThroughput: (1.6e6 / 8), uploadThroughput: (750e3 / 8) },
  },
];

// Recorded in the page from its first script on: when the root gets
// `data-hydrated` (set by the app once hydrated) and when the live line
// says the event stream is up, in ms since the navigation started.
const marks = () => {
  window.__marks = {};
  const check = () => {
    const root = document.documentElement;
    if (!window.__marks.hydrated && root.getAttribute('data-hydrated') === 'true') {
      window.__marks.hydrated = performance.now();
    }
    const live = document.querySelector('[data-testid="live-status"]');
    if (!window.__marks.live && window.__marks.hydrated && live && live.getAttribute('data-live') === 'up') {
      window.__marks.live = performance.now();
    }
  };
  new MutationObserver(check).observe(document, { subtree: true, childList: true, attributes: true });
};

/// Loads the dashboard once in `page`; the figures of that load.
async function load(page, cdp) {
  const bytes = new Map(); // request id -> bytes on the wire
  const onData = (e) => bytes.set(e.requestId, (bytes.get(e.requestId) ?? 0) + e.encodedDataLength);
  const onFinished = (e) => bytes.set(e.requestId, Math.max(bytes.get(e.requestId) ?? 0, e.encodedDataLength));
  const fromCache = new Set();
  const urls = new Map();
  const onSent = (e) => urls.set(e.requestId, e.request.url);
  const onCached = (e) => fromCache.add(e.requestId);
  const onResponse = (e) => {
    if (e.response.fromDiskCache || e.response.fromPrefetchCache) fromCache.add(e.requestId);
  };
  cdp.on('Network.dataReceived', onData);
  cdp.on('Network.loadingFinished', onFinished);
  cdp.on('Network.requestWillBeSent', onSent);
  cdp.on('Network.requestServedFromCache', onCached);
  cdp.on('Network.responseReceived', onResponse);
  try {
    await page.goto(base + '/', { waitUntil: 'commit', timeout: 120_000 });
    await page.waitForFunction(() => window.__marks && window.__marks.live, null, { timeout: 120_000, polling: 50 });
    const figures = await page.evaluate(() => {
      const paint = performance.getEntriesByName('first-contentful-paint')[0];
      return { content: paint ? paint.startTime : null, hydrated: window.__marks.hydrated, live: window.__marks.live };
    });
    // Let requests that finish with the page (the live stream's first events) be counted.
    await page.waitForTimeout(200);
    let total = 0;
    for (const n of bytes.values()) total += n;
    const wasm = [...urls].filter(([, url]) => url.endsWith('.wasm'));
    return {
      ...figures,
      bytes: total,
      requests: urls.size,
      wasmRequests: wasm.length,
      wasmFromCache: wasm.filter(([id]) => fromCache.has(id)).length,
    };
  } finally {
    cdp.off('Network.dataReceived', onData);
    cdp.off('Network.loadingFinished', onFinished);
    cdp.off('Network.requestWillBeSent', onSent);
    cdp.off('Network.requestServedFromCache', onCached);
    cdp.off('Network.responseReceived', onResponse);
  }
}

const median = (values) => {
  const sorted = values.filter((v) => v !== null).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : null;
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  for (const link of links) {
    const first = [];
    const repeat = [];
    for (let i = 0; i < runs; i++) {
      // A fresh context: an empty cache, as on a first visit.
      const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${token}` } });
      await context.addInitScript(marks);
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('Network.enable');
      if (link.conditions) {
        await cdp.send('Network.emulateNetworkConditions', { offline: false, ...link.conditions });
      }
      first.push(await load(page, cdp));
      // The same browser again: what a repeat visit downloads.
      repeat.push(await load(page, cdp));
      await context.close();
    }
    const summary = (samples) => ({
      content: median(samples.map((s) => s.content)),
      hydrated: median(samples.map((s) => s.hydrated)),
      live: median(samples.map((s) => s.live)),
      bytes: median(samples.map((s) => s.bytes)),
      requests: median(samples.map((s) => s.requests)),
      wasmRequests: median(samples.map((s) => s.wasmRequests)),
      wasmFromCache: median(samples.map((s) => s.wasmFromCache)),
    });
    console.log(JSON.stringify({ link: link.name, runs, first: summary(first), repeat: summary(repeat) }));
  }
} finally {
  await browser.close();
}
