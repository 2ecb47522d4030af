import AxeBuilder from '@axe-core/playwright';
import { type APIRequestContext, type Page } from '@playwright/test';
import { stuckDay } from '../playwright.config';
import { expect, test } from './fixtures';

type PendingOrder = { orderId: string };
type PendingPage = { orders: PendingOrder[]; next: string | null };

async function hydrated(page: Page) {
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}

/** The PENDING counter of a day (today by default). */
async function pendingCount(request: APIRequestContext, date?: string): Promise<number> {
  return (await (await request.get(`/api/metrics/pending${date ? `?date=${date}` : ''}`)).json()).pending;
}

/** Every order of a list query, through the API. */
async function all(request: APIRequestContext, query: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: PendingPage = await (await request.get(`/api/pending?${query}${cursor ? `&cursor=${cursor}` : ''}`)).json();
    ids.push(...page.orders.map((o) => o.orderId));
    cursor = page.next;
  } while (cursor);
  return ids;
}

/** A day's PENDING count once the stream consumer has caught up: the same twice, a second apart. */
async function settledPendingCount(request: APIRequestContext, date: string): Promise<number> {
  let last = -1;
  let now = await pendingCount(request, date);
  for (let i = 0; i < 30 && now !== last; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    [last, now] = [now, await pendingCount(request, date)];
  }
  return now;
}

async function waitForRun(page: Page) {
  await expect(page.getByTestId('bulk-progress')).not.toHaveAttribute('data-state', 'running', { timeout: 20_000 });
}

test('thirty stuck orders selected across two pages are cancelled with a reason, and the counters follow', async ({
  page,
  request,
}) => {
  // An order is stuck once PENDING for 30 minutes, so today's are too few for two pages early in
  // the day (none before 00:30 UTC). The e2e server seeds a day long past with a clock of its own
  // (playwright.config.ts): every PENDING order of it is stuck, whatever the time now.
  await expect.poll(() => pendingCount(request, stuckDay), { timeout: 15_000 }).toBeGreaterThan(100);
  const before = await settledPendingCount(request, stuckDay);
  await page.goto(`/?date=${stuckDay}&stuck=1&limit=25`);
  await hydrated(page);
  const firstPage = await page.locator('[data-testid="pending-table"] tbody tr').evaluateAll((trs) =>
    trs.map((tr) => tr.getAttribute('data-order-id')!),
  );
  expect(firstPage.length).toBe(25);
  await page.getByTestId('select-page').click();
  await expect(page.getByTestId('selected-count')).toHaveText('25 selected');
  await page.getByTestId('next').click();
  await hydrated(page);
  const secondPage = page.locator('[data-testid="pending-table"] tbody tr');
  // The first page stays on screen until the second arrives.
  await expect(secondPage.first()).not.toHaveAttribute('data-order-id', firstPage[0]);
  const chosen: string[] = [];
  for (let i = 0; i < 5; i++) {
    const row = secondPage.nth(i);
    chosen.push((await row.getAttribute('data-order-id'))!);
    await row.getByTestId('select').check();
  }
  await expect(page.getByTestId('selected-count')).toHaveText('30 selected');

  await page.getByTestId('bulk-cancel').click();
  await page.getByTestId('bulk-proceed').click();
  await expect(page.getByTestId('bulk-error')).toContainText('needs a reason');
  await page.getByTestId('bulk-cancel').click();
  await page.getByTestId('bulk-reason').fill('sold out during the sale');
  await page.getByTestId('bulk-proceed').click();
  await waitForRun(page);
  await expect(page.getByTestId('bulk-summary')).toContainText('done: 30 of 30 changed');
  for (const id of [...firstPage, ...chosen]) {
    const order = await (await request.get(`/api/orders/${id}`)).json();
    expect(order.status).toBe('CANCELLED');
  }
  const history = await (await request.get(`/api/orders/${chosen[0]}/history`)).json();
  const last = history.history[history.history.length - 1];
  expect(last.reason).toBe('sold out during the sale');
  expect(last.actor).toBe('e2e-ops');
  expect(last.bulkId).toBeTruthy();
  await expect.poll(() => pendingCount(request, stuckDay), { timeout: 15_000 }).toBe(before - 30);
  await expect(page.getByTestId('pending-count')).toHaveText(String(before - 30), { timeout: 15_000 });
});

test('a bulk run where someone else changed three orders first reports those three and changes the rest', async ({
  page,
  request,
}) => {
  await page.goto('/?limit=25');
  await hydrated(page);
  const rows = page.locator('[data-testid="pending-table"] tbody tr');
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    ids.push((await rows.nth(i).getAttribute('data-order-id'))!);
    await rows.nth(i).getByTestId('select').check();
  }
  for (const id of ids.slice(0, 3)) {
    const other = await request.post(`/api/orders/${id}/status`, { data: { from: 'PENDING', to: 'CONFIRMED' } });
    expect(other.status()).toBe(200);
  }
  await page.getByTestId('bulk-confirm').click();
  await page.getByTestId('bulk-proceed').click();
  await waitForRun(page);
  await expect(page.getByTestId('bulk-summary')).toContainText('7 of 10 changed · 3 already changed by someone else');
  const conflicts = (await page.getByTestId('bulk-conflicts').textContent()) ?? '';
  for (const id of ids.slice(0, 3)) expect(conflicts).toContain(id);
});

test('the export holds exactly the orders of the list, in its order', async ({ page, request }) => {
  await page.goto('/?days=7');
  await hydrated(page);
  const expected = await all(request, 'days=7&limit=100');
  expect(expected.length).toBeGreaterThan(100);
  const download = page.waitForEvent('download');
  await page.getByTestId('export-csv').click();
  const file = await (await download).path();
  const text = require('node:fs').readFileSync(file, 'utf8') as string;
  const lines = text.trim().split(/\r?\n/);
  expect(lines[0].startsWith('orderId,')).toBeTruthy();
  expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(expected);
});

test('the queue can be worked from the keyboard', async ({ page }) => {
  await page.goto('/?limit=25');
  await hydrated(page);
  const rows = page.locator('[data-testid="pending-table"] tbody tr');
  const second = (await rows.nth(1).getAttribute('data-order-id'))!;
  await page.keyboard.press('?');
  await expect(page.getByTestId('key-help')).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('key-help')).toHaveCount(0);
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  await expect(rows.nth(1)).toHaveClass(/focused/);
  await expect(rows.nth(1)).toBeFocused();
  await page.keyboard.press('x');
  await expect(page.getByTestId('selected-count')).toHaveText('1 selected');
  await page.keyboard.press('Shift+C');
  await expect(page.getByTestId('bulk-reason')).toBeFocused();
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('bulk-ask')).toHaveCount(0);
  await page.keyboard.press('/');
  await expect(page.locator('header .search input')).toBeFocused();
  await page.locator('header .search input').press('Escape');
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('k');
  await expect(rows.nth(0)).toHaveClass(/focused/);
  await page.keyboard.press('j');
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/orders/${second}$`));
});

test('the four main pages have no serious accessibility violations', async ({ page, request }) => {
  const first: PendingPage = await (await request.get('/api/pending?limit=1')).json();
  const order = await (await request.get(`/api/orders/${first.orders[0].orderId}`)).json();
  for (const path of ['/', `/orders/${order.orderId}`, `/customers/${order.customerId}`, '/login']) {
    await page.goto(path);
    await hydrated(page);
    const results = await new AxeBuilder({ page }).analyze();
    const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    expect(serious.map((v) => `${path}: ${v.id}: ${v.help}`)).toEqual([]);
  }
});
