import AxeBuilder from '@axe-core/playwright';
import { request as apiRequest, type Browser, type Page } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createOrder, expect, test } from './fixtures';

/** A viewer's browser (the lowest role that may see capacity), with an
 * account of its own: the sign-in tests disable e2e-viewer. */
async function viewer(browser: Browser, baseURL: string | undefined): Promise<Page> {
  const context = await browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  await page.goto('/login?next=/capacity');
  await page.getByLabel('Name').fill('e2e-capacity');
  await page.getByLabel('Password').fill('e2e-password-capacity');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/^[^?]*\/capacity$/);
  return page;
}

/** A number as the page prints it ("1,234.5"). */
function figure(text: string | null): number {
  return Number((text ?? '').replace(/[^0-9.]/g, ''));
}

test('a viewer sees the units, heat, plan and advice of real writes, and the page is accessible', async ({
  browser,
  baseURL,
  request,
}) => {
  // A few orders written by this server, so its own (unflushed) minutes show.
  for (let i = 0; i < 5; i++) {
    await createOrder(request, `capacity-e2e-${Date.now()}-${i}`, 'cust-capacity');
  }
  const page = await viewer(browser, baseURL);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('who')).toContainText('e2e-capacity');
  await expect(page.getByTestId('role')).toHaveText('viewer');

  // Units per table and index: GSI2 took writes (the orders above entered PENDING).
  const gsi2 = page.locator('[data-testid="units-table"] tr[data-resource$="/GSI2"]');
  await expect(gsi2).toHaveCount(1);
  expect(figure(await gsi2.getByTestId('write-units').textContent())).toBeGreaterThan(0);
  const table = page.locator('[data-testid="units-table"] tr[data-resource="northwind-orders"]');
  expect(figure(await table.getByTestId('write-units').textContent())).toBeGreaterThan(0);
  // Every reader of the counters and the consumer's checkpoints reads the metrics table.
  const metrics = page.locator('[data-testid="units-table"] tr[data-resource="northwind-metrics"]');
  expect(figure(await metrics.getByTestId('read-units').textContent())).toBeGreaterThan(0);
  await expect(page.getByTestId('units-chart').first()).toBeVisible();

  // The day's shard heat names its hottest shard-minute; planner and advisor show.
  await expect(page.getByTestId('heat-table')).toBeVisible();
  await expect(page.getByTestId('hottest')).toContainText('shard');
  await expect(page.getByTestId('plan-shards')).toBeVisible();
  // A freshly seeded store has minutes, not days, of history: no mode yet, and the page says why.
  await expect(page.getByTestId('advice-table').getByTestId('mode').first()).toHaveText('none');
  await expect(page.getByTestId('advice-window')).toContainText('observed');
  await expect(page.getByTestId('advice-table')).toContainText('not enough history');

  // The same figures as JSON, with the viewer's session.
  const json = await (await page.request.get('/api/capacity')).json();
  expect(json.resources.some((r: { resource: string }) => r.resource.endsWith('/GSI2'))).toBe(true);

  const results = await new AxeBuilder({ page }).analyze();
  const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(serious.map((v) => `${v.id}: ${v.help}`)).toEqual([]);

  // docs/capacity.png, the guides' picture of this page, is taken by
  // tests/docs.shots.ts (`make screenshots`).
  await page.context().close();
});

/** PutItem straight into the store, as the order service writes: no app in between. */
async function putOutside(endpoint: string, item: Record<string, unknown>) {
  const store = await apiRequest.newContext();
  const response = await store.post(endpoint, {
    headers: {
      'Content-Type': 'application/x-amz-json-1.0',
      'X-Amz-Target': 'DynamoDB_20120810.PutItem',
      // The embedded store checks that a request is signed, not the signature.
      'X-Amz-Date': '20260101T000000Z',
      Authorization:
        'AWS4-HMAC-SHA256 Credential=outside/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
    },
    data: JSON.stringify({ TableName: 'northwind-orders', Item: item }),
  });
  expect(response.status(), await response.text()).toBe(200);
  await store.dispose();
}

test('a burst written outside the app shows on the capacity page, priced from the stream', async ({
  browser,
  baseURL,
  request,
}) => {
  test.setTimeout(150_000);
  const endpoint = readFileSync(join(__dirname, '..', '.run', 'store-endpoint'), 'utf8').trim();
  const page = await viewer(browser, baseURL);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('units-source')).toHaveAttribute('data-source', 'stream');
  const orders = page.locator('[data-testid="units-table"] tr[data-resource="northwind-orders"]');
  await expect(orders.getByTestId('write-source')).toHaveText('stream');
  await expect(orders.getByTestId('read-source')).toHaveText("this app's calls");
  const before = figure(await orders.getByTestId('write-units').textContent());

  // Hot keys keep, per minute and index, the first 20 keys to pass 10 write
  // units (src/server/stream/hotkeys.rs): the seed's minute is full of its
  // customers, and a burst in that minute would not be kept. If the seed's
  // minute is still running, the burst waits for the next one.
  const minuteOfDay = () => Math.floor((Date.now() % 86_400_000) / 60_000);
  const seeded: { hotKeys: { resource: string; minute: number }[] } = await (await request.get('/api/capacity')).json();
  if (seeded.hotKeys.some((h) => h.resource.endsWith('/GSI1') && h.minute === minuteOfDay())) {
    await page.waitForTimeout(60_000 - (Date.now() % 60_000) + 500);
  }

  // 150 orders of one customer, a bot ordering in a loop, put by another writer
  // (ten at a time): more than the seed's busiest customer wrote in its minute
  // (123), so the bot is among the day's hottest GSI1 keys.
  const burst = 150;
  const stamp = Date.now();
  const createdAt = new Date().toISOString();
  const put = (i: number) => {
    const id = `burst-${stamp}-${i}`;
    return putOutside(endpoint, {
      PK: { S: `ORDER#${id}` },
      GSI1PK: { S: 'CUSTOMER#e2e-bot' },
      GSI1SK: { S: `${createdAt}#${id}` },
      orderId: { S: id },
      customerId: { S: 'e2e-bot' },
      status: { S: 'CONFIRMED' },
      createdAt: { S: createdAt },
      updatedAt: { S: createdAt },
      total: { N: '2490' },
      currency: { S: 'USD' },
      items: { L: [{ M: { sku: { S: 'TENT-2P' }, name: { S: 'Tent' }, quantity: { N: '1' }, unitPrice: { N: '2490' } } }] },
      itemCount: { N: '1' },
      shippingCity: { S: 'Oslo' },
      shippingCountry: { S: 'NO' },
    });
  };
  for (let i = 0; i < burst; i += 10) {
    await Promise.all(Array.from({ length: 10 }, (_, j) => put(i + j)));
  }

  // The page reads its figures again every few seconds: the burst appears
  // (a put of one unit each on the table), and the bot's GSI1 partition is a hot key.
  await expect
    .poll(async () => figure(await orders.getByTestId('write-units').textContent()), { timeout: 30_000 })
    .toBeGreaterThanOrEqual(before + burst);
  const bot = page.locator('[data-testid="hot-keys-table"] tr[data-key="CUSTOMER#e2e-bot"]');
  await expect(bot.first()).toBeVisible({ timeout: 30_000 });
  await expect(bot.first()).toHaveAttribute('data-resource', 'northwind-orders/GSI1');
  await page.context().close();
});
