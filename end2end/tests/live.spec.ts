import { type APIRequestContext } from '@playwright/test';
import { createOrder, expect, test } from './fixtures';

type Metrics = { pending: number; created: number; freshness: { recordsApplied: number } };

async function pendingTotal(request: APIRequestContext): Promise<number> {
  let total = 0;
  let cursor: string | null = null;
  do {
    const page = await (await request.get(`/api/pending?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json();
    total += page.orders.length;
    cursor = page.next;
  } while (cursor);
  return total;
}

test('an order created elsewhere appears live, and leaves when it is confirmed', async ({ page, request }) => {
  // Wait for the consumer to have counted everything written so far.
  const expected = await pendingTotal(request);
  await expect
    .poll(async () => ((await (await request.get('/api/metrics/pending')).json()) as Metrics).pending, { timeout: 15_000 })
    .toBe(expected);

  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('live-status')).toHaveAttribute('data-live', 'up');
  const figure = page.getByTestId('pending-count');
  await expect(figure).toHaveText(String(expected));

  const orderId = `live-${Date.now()}`;
  await createOrder(request, orderId);
  const row = page.locator(`tr[data-order-id="${orderId}"]`);
  await expect(row).toBeVisible({ timeout: 3_000 });
  await expect(figure).toHaveText(String(expected + 1), { timeout: 3_000 });
  // Newest first: it is the top row.
  await expect(page.locator('[data-testid="pending-table"] tbody tr').first()).toHaveAttribute('data-order-id', orderId);

  const confirmed = await request.post(`/api/orders/${orderId}/status`, { data: { from: 'PENDING', to: 'CONFIRMED' } });
  expect(confirmed.status()).toBe(200);
  await expect(row).toHaveCount(0, { timeout: 3_000 });
  await expect(figure).toHaveText(String(expected), { timeout: 3_000 });
});

test('on a later page, new orders are announced instead of moved in', async ({ page, request }) => {
  const rows = () =>
    page.locator('[data-testid="pending-table"] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-order-id')));
  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  const pageOne = await rows();
  await page.getByTestId('next').click();
  await expect(page).toHaveURL(/cursor=/);
  await expect.poll(rows).not.toEqual(pageOne);
  await expect(page.getByTestId('live-status')).toHaveAttribute('data-live', 'up');
  const before = await rows();

  const orderId = `later-${Date.now()}`;
  await createOrder(request, orderId);
  await expect(page.getByTestId('newer')).toContainText('1 new orders', { timeout: 3_000 });
  expect(await rows()).toEqual(before);
  await page.getByRole('link', { name: 'Go to page one' }).click();
  await expect(page.locator('[data-testid="pending-table"] tbody tr').first()).toHaveAttribute('data-order-id', orderId);
});

test('the live stream opens before the wasm arrives, and the hydrated page keeps it', async ({ page, request }) => {
  const streams: string[] = [];
  const answered: string[] = [];
  page.on('request', (r) => {
    if (r.url().includes('/api/live')) streams.push(r.url());
  });
  page.on('response', (r) => {
    if (r.url().includes('/api/live')) answered.push('live');
    else if (r.url().endsWith('.wasm')) answered.push('wasm');
  });
  // A slow link, for the wasm: held back a second and a half.
  await page.route(/\/pkg\/.*\.wasm$/, async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await route.continue();
  });
  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true', { timeout: 15_000 });
  await expect(page.getByTestId('live-status')).toHaveAttribute('data-live', 'up');
  expect(answered[0], `answers in order: ${answered.join(', ')}`).toBe('live');
  // The page took over the stream its head opened: one stream, not two.
  expect(streams).toHaveLength(1);

  // And it is live: an order created elsewhere arrives through it.
  const orderId = `early-${Date.now()}`;
  await createOrder(request, orderId);
  await expect(page.locator(`tr[data-order-id="${orderId}"]`)).toBeVisible({ timeout: 3_000 });
  expect(streams).toHaveLength(1);
});
