import { expect, test } from '@playwright/test';

type PendingOrder = { orderId: string; customerId: string; createdAt: string };
type PendingPage = { orders: PendingOrder[]; next: string | null };

test('the dashboard server-renders the seeded PENDING orders', async ({ page, request }) => {
  const api = await request.get('/api/pending?limit=25');
  expect(api.ok()).toBeTruthy();
  const first: PendingPage = await api.json();
  // The e2e server seeds a few hundred of today's orders as PENDING.
  expect(first.orders.length).toBe(25);
  expect(first.next).not.toBeNull();

  await page.goto('/');
  const rows = page.locator('[data-testid="pending-table"] tbody tr');
  await expect(rows).toHaveCount(25);
  const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-order-id')));
  expect(shown).toEqual(first.orders.map((o) => o.orderId));
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
});
