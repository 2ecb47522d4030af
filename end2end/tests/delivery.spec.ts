import { type CDPSession, type Page } from '@playwright/test';
import { expect, test } from './fixtures';

/** The wasm files a navigation asked for, and which of them the browser's
 * cache answered (from the DevTools protocol's network events). */
async function watchWasm(page: Page): Promise<{ cdp: CDPSession; requested: Map<string, string>; cached: Set<string> }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const requested = new Map<string, string>();
  const cached = new Set<string>();
  cdp.on('Network.requestWillBeSent', (e) => {
    if (new URL(e.request.url).pathname.endsWith('.wasm')) requested.set(e.requestId, e.request.url);
  });
  cdp.on('Network.requestServedFromCache', (e) => cached.add(e.requestId));
  cdp.on('Network.responseReceived', (e) => {
    if (e.response.fromDiskCache || e.response.fromPrefetchCache) cached.add(e.requestId);
  });
  return { cdp, requested, cached };
}

test('a repeat visit takes the wasm from the browser cache', async ({ page }) => {
  // The dashboard (the main module alone) and a page with chunks of its own.
  for (const [path, atLeast] of [['/', 1], ['/capacity', 2]] as const) {
    await page.goto(path);
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');

    const { cdp, requested, cached } = await watchWasm(page);
    await page.goto(path);
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    const wasm = [...requested.entries()];
    expect(wasm.length, `wasm files of ${path}`).toBeGreaterThanOrEqual(atLeast);
    for (const [id, url] of wasm) {
      expect(cached.has(id), `${url} came from the cache`).toBe(true);
    }
    await cdp.detach();
  }
});

test('a page whose code does not arrive says so, and appears when tried again', async ({ page }) => {
  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  // The capacity page's chunks are not loaded yet: refuse every wasm file from here on.
  const refused: string[] = [];
  await page.route(/\/pkg\/.*\.wasm$/, (route) => {
    refused.push(route.request().url());
    return route.abort('connectionreset');
  });
  await page.getByTestId('nav-capacity').click();
  await expect(page).toHaveURL(/\/capacity$/);
  const failed = page.getByTestId('chunk-failed');
  await expect(failed).toBeVisible();
  await expect(failed).toContainText('did not load');
  expect(refused.length).toBeGreaterThan(0);

  // The connection is back: "Try again" loads the page in place.
  await page.unroute(/\/pkg\/.*\.wasm$/);
  await page.getByTestId('chunk-retry').click();
  await expect(page.getByRole('heading', { name: 'Capacity', exact: true })).toBeVisible();
  await expect(failed).toHaveCount(0);
  // The app lives on: back to the dashboard by its link.
  await page.getByRole('link', { name: 'Northwind Ops' }).click();
  await expect(page.getByTestId('pending-table')).toBeVisible();
});

test('each page loads its own code: the dashboard is the main module alone, the capacity page its chunks', async ({
  page,
}) => {
  const { requested } = await watchWasm(page);
  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('pending-table')).toBeVisible();
  const names = () => [...requested.values()].map((url) => new URL(url).pathname.split('/').pop() ?? '');
  // One wasm file, the main module: no page's chunk, nor any shared one.
  expect(names().filter((n) => n.startsWith('northwind-ops.'))).toHaveLength(1);
  expect(names().filter((n) => n.startsWith('split_') || n.startsWith('chunk_'))).toEqual([]);

  await page.getByTestId('nav-capacity').click();
  await expect(page.getByRole('heading', { name: 'Capacity', exact: true })).toBeVisible();
  expect(names().some((n) => n.startsWith('split_capacity_page.'))).toBe(true);
});
