import { type Page } from '@playwright/test';
import { expect, test } from './fixtures';

type PendingPage = { orders: { orderId: string; customerId: string }[]; next: string | null };
type Order = { orderId: string; customerId: string; status: string; createdAt: string; total: number; currency: string };
type OrderPage = { orders: Order[]; next: string | null };

async function hydrated(page: Page) {
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}

test('the order page shows the order, and confirming it takes it off the dashboard', async ({ page, request }) => {
  const first: PendingPage = await (await request.get('/api/pending?limit=25')).json();
  const target = first.orders[0];
  const order: Order = await (await request.get(`/api/orders/${target.orderId}`)).json();

  await page.goto('/');
  await expect(page.locator(`tr[data-order-id="${target.orderId}"]`)).toBeVisible();
  await page.locator(`tr[data-order-id="${target.orderId}"] a`).first().click();
  await expect(page).toHaveURL(new RegExp(`/orders/${target.orderId}$`));
  await hydrated(page);
  const fields = page.getByTestId('order-fields');
  await expect(fields).toContainText(order.customerId);
  await expect(fields).toContainText(order.createdAt);
  await expect(page.getByTestId('order-status')).toHaveText('PENDING');

  await page.getByRole('button', { name: 'Mark CONFIRMED' }).click();
  await expect(page.getByTestId('order-status')).toHaveText('CONFIRMED');
  expect((await (await request.get(`/api/orders/${target.orderId}`)).json()).status).toBe('CONFIRMED');

  await page.goto('/');
  await expect(page.locator('[data-testid="pending-table"] tbody tr')).toHaveCount(25);
  await expect(page.locator(`tr[data-order-id="${target.orderId}"]`)).toHaveCount(0);
});

test('a change made meanwhile by someone else shows the conflict', async ({ page, request }) => {
  const first: PendingPage = await (await request.get('/api/pending?limit=25')).json();
  const target = first.orders[3];
  await page.goto(`/orders/${target.orderId}`);
  await hydrated(page);
  // Another agent confirms it behind this page's back.
  const other = await request.post(`/api/orders/${target.orderId}/status`, { data: { from: 'PENDING', to: 'CONFIRMED' } });
  expect(other.status()).toBe(200);

  await page.getByTestId('reason').fill('customer called to cancel');
  await page.getByRole('button', { name: 'Cancel order' }).click();
  await expect(page.getByTestId('conflict')).toContainText('Changed by someone else: reload');
  expect((await (await request.get(`/api/orders/${target.orderId}`)).json()).status).toBe('CONFIRMED');
});

test('customer history is newest first across pages', async ({ page, request }) => {
  // cust-0000 is the seed's most frequent customer.
  const all: Order[] = [];
  let cursor: string | null = null;
  do {
    const res: OrderPage = await (await request.get(`/api/customers/cust-0000/orders?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json();
    all.push(...res.orders);
    cursor = res.next;
  } while (cursor);
  expect(all.length).toBeGreaterThan(10);

  await page.goto('/customers/cust-0000?limit=5');
  await hydrated(page);
  const rows = () =>
    page.locator('[data-testid="history-table"] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-order-id') ?? ''));
  const seen: string[] = [];
  for (;;) {
    const ids = await rows();
    seen.push(...ids);
    const next = page.getByTestId('next');
    if ((await next.count()) === 0) break;
    const before = page.url();
    await next.click();
    await expect(page).not.toHaveURL(before);
    await expect.poll(rows).not.toEqual(ids);
  }
  expect(seen).toEqual(all.map((o) => o.orderId));
  const created = all.map((o) => o.createdAt);
  expect([...created].sort().reverse()).toEqual(created);
});

test('search finds orders and customers; unknown ids give the 404 page', async ({ page, request }) => {
  const first: PendingPage = await (await request.get('/api/pending?limit=1')).json();
  const { orderId, customerId } = first.orders[0];
  const search = page.getByRole('searchbox', { name: 'Order or customer id' });

  await page.goto('/');
  await search.fill(orderId);
  await search.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/orders/${orderId}$`));
  await expect(page.getByRole('heading', { level: 1 })).toContainText(orderId);

  await search.fill(customerId);
  await search.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/customers/${customerId}$`));
  await expect(page.getByTestId('history-table')).toBeVisible();

  await search.fill('no-such-thing');
  await search.press('Enter');
  await expect(page.getByTestId('not-found')).toContainText('nothing found for "no-such-thing"');

  const missingOrder = await page.goto('/orders/no-such-order');
  expect(missingOrder?.status()).toBe(404);
  await expect(page.getByTestId('not-found')).toContainText('order no-such-order not found');
  const missingCustomer = await page.goto('/customers/no-such-customer');
  expect(missingCustomer?.status()).toBe(404);
  await expect(page.getByTestId('not-found')).toContainText('customer no-such-customer has no orders');
});
