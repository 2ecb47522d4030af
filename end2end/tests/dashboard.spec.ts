import { type APIRequestContext, type Page } from '@playwright/test';
import { expect, test } from './fixtures';

type PendingOrder = { orderId: string; customerId: string; createdAt: string };
type PendingPage = { orders: PendingOrder[]; next: string | null; date: string };

/** Every PENDING order of the default query, walked through the API. */
async function allPending(request: APIRequestContext, query = 'limit=100'): Promise<PendingOrder[]> {
  const all: PendingOrder[] = [];
  let cursor: string | null = null;
  do {
    const res = await request.get(`/api/pending?${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.ok()).toBeTruthy();
    const page: PendingPage = await res.json();
    all.push(...page.orders);
    cursor = page.next;
  } while (cursor);
  return all;
}

async function shownIds(page: Page): Promise<string[]> {
  return page
    .locator('[data-testid="pending-table"] tbody tr')
    .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-order-id') ?? ''));
}

async function hydrated(page: Page) {
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}

test.describe('with JavaScript off', () => {
  test.use({ javaScriptEnabled: false });

  test('the dashboard HTML holds the first page of PENDING orders', async ({ page, request }) => {
    const first: PendingPage = await (await request.get('/api/pending?limit=25')).json();
    // The e2e server seeds a few hundred of today's orders as PENDING.
    expect(first.orders.length).toBe(25);
    await page.goto('/');
    expect(await shownIds(page)).toEqual(first.orders.map((o) => o.orderId));
    await expect(page.getByTestId('pending-count')).not.toHaveText('0');
  });
});

test('paging forward to the end and back shows every PENDING order once, newest first', async ({ page, request }) => {
  const expected = await allPending(request);
  expect(expected.length).toBeGreaterThan(100);
  const keys = expected.map((o) => `${o.createdAt}#${o.orderId}`);
  expect([...keys].sort().reverse()).toEqual(keys);

  const consoleErrors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(msg.text());
  });
  await page.goto('/?limit=50');
  await hydrated(page);
  const pages: string[][] = [];
  for (;;) {
    const ids = await shownIds(page);
    pages.push(ids);
    const next = page.getByTestId('next');
    if ((await next.count()) === 0) break;
    const before = page.url();
    await next.click();
    await expect(page).not.toHaveURL(before);
    await expect.poll(() => shownIds(page)).not.toEqual(ids);
  }
  expect(pages.flat()).toEqual(expected.map((o) => o.orderId));

  for (let i = pages.length - 2; i >= 0; i--) {
    await page.getByTestId('prev').click();
    await expect.poll(() => shownIds(page)).toEqual(pages[i]);
  }
  await expect(page).not.toHaveURL(/cursor=/);
  await expect(page.getByTestId('prev')).toHaveCount(0);
  // Hydration mismatches and panics are reported on the console.
  expect(consoleErrors).toEqual([]);
});

test('page size and day choices land in the URL and survive a reload', async ({ page, request }) => {
  await page.goto('/');
  await hydrated(page);
  await page.getByTestId('limit').selectOption('50');
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(page).toHaveURL(/limit=50/);
  await expect(page.locator('[data-testid="pending-table"] tbody tr')).toHaveCount(50);
  await page.reload();
  await expect(page.locator('[data-testid="pending-table"] tbody tr')).toHaveCount(50);
  await expect(page.getByTestId('limit')).toHaveValue('50');

  const today: PendingPage = await (await request.get('/api/pending?limit=1')).json();
  const yesterday = new Date(Date.parse(`${today.date}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
  await page.getByTestId('date').fill(yesterday);
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(page).toHaveURL(new RegExp(`date=${yesterday}`));
  await page.reload();
  await expect(page.getByTestId('date')).toHaveValue(yesterday);
  const expected = await allPending(request, `date=${yesterday}&limit=50`);
  expect(expected.length).toBeGreaterThan(0);
  expect(await shownIds(page)).toEqual(expected.slice(0, 50).map((o) => o.orderId));

  // Older days: stuck orders from the days before stay in sight.
  await page.getByTestId('older').check();
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(page).toHaveURL(/days=7/);
  await expect(page.getByTestId('as-of')).toContainText('and the 6 days before');
});

test('a tampered cursor in the URL gives the cursor message, not a crash', async ({ page, request }) => {
  const first: PendingPage = await (await request.get('/api/pending?limit=25')).json();
  const tampered = first.next!.slice(0, -3) + (first.next!.endsWith('AAA') ? 'BBB' : 'AAA');
  const response = await page.goto(`/?cursor=${tampered}`);
  expect(response?.status()).toBe(400);
  await expect(page.getByTestId('cursor-error')).toBeVisible();
  await page.getByRole('link', { name: 'Go to the first page' }).click();
  await expect(page.locator('[data-testid="pending-table"] tbody tr')).toHaveCount(25);
});
