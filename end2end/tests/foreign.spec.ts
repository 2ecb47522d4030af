import { request as apiRequest } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createOrder, expect, test } from './fixtures';

type Item = Record<string, Record<string, unknown>>;

/** One DynamoDB call straight to the store, as another service makes it: no app in between. */
async function store(target: 'GetItem' | 'PutItem' | 'DeleteItem', body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const endpoint = readFileSync(join(__dirname, '..', '.run', 'store-endpoint'), 'utf8').trim();
  const context = await apiRequest.newContext();
  const response = await context.post(endpoint, {
    headers: {
      'Content-Type': 'application/x-amz-json-1.0',
      'X-Amz-Target': `DynamoDB_20120810.${target}`,
      // The embedded store checks that a request is signed, not the signature.
      'X-Amz-Date': '20260101T000000Z',
      Authorization:
        'AWS4-HMAC-SHA256 Credential=outside/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
    },
    data: JSON.stringify({ TableName: 'northwind-orders', ...body }),
  });
  expect(response.status(), await response.text()).toBe(200);
  const answer = await response.json();
  await context.dispose();
  return answer;
}

test('the dashboard with another writer’s incomplete order on page one renders, hydrates and stays live', async ({
  page,
  request,
}) => {
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });

  // A real order of today, copied by another writer under a new id with its
  // total left out, and once more with a status this console does not know.
  const stamp = Date.now();
  const [templateId, noTotal, onHold, later] = ['tpl', 'no-total', 'on-hold', 'after-foreign'].map((p) => `${p}-${stamp}`);
  await createOrder(request, templateId, 'cust-foreign');
  const template = (await store('GetItem', { Key: { PK: { S: `ORDER#${templateId}` } }, ConsistentRead: true }))
    .Item as Item;
  const copy = (id: string): Item => {
    const createdAt = template.createdAt.S as string;
    return {
      ...template,
      PK: { S: `ORDER#${id}` },
      orderId: { S: id },
      GSI1SK: { S: `${createdAt}#${id}` },
      GSI2SK: { S: `${createdAt}#${id}` },
    };
  };
  const { total: _dropped, ...withoutTotal } = copy(noTotal);

  try {
    await store('PutItem', { Item: withoutTotal });
    await store('PutItem', { Item: { ...copy(onHold), status: { S: 'ON_HOLD' } } });

    await page.goto('/');
    // Rendered on the server with the order in it, flagged, no made-up total.
    const row = page.locator(`tr[data-order-id="${noTotal}"]`);
    await expect(row).toBeVisible();
    await expect(row.getByTestId('problems-flag')).toHaveText('⚠ 1 problem');
    await expect(row.getByTestId('problems-flag')).toHaveAttribute('title', 'total is missing');
    await expect(row.locator('td.num').last()).toHaveText('—');
    await expect(row.getByRole('link', { name: noTotal })).toHaveAttribute('href', `/orders/${noTotal}`);
    await expect(page.locator(`tr[data-order-id="${onHold}"]`)).toBeVisible();
    // Hydrated, and live.
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(page.getByTestId('live-status')).toHaveAttribute('data-live', 'up');

    // Live still: an order created after appears on its own, above them.
    await createOrder(request, later);
    await expect(page.locator(`tr[data-order-id="${later}"]`)).toBeVisible({ timeout: 3_000 });
    await expect(page.locator('[data-testid="pending-table"] tbody tr').first()).toHaveAttribute('data-order-id', later);
    await expect(row).toBeVisible();

    // The order's page says what could not be read, and offers no change
    // from a status it does not know.
    await row.getByRole('link', { name: noTotal }).click();
    await expect(page).toHaveURL(new RegExp(`/orders/${noTotal}$`));
    await expect(page.getByTestId('problems')).toContainText('total is missing');
    await expect(page.getByTestId('order-total')).toHaveText('—');
    await page.goto(`/orders/${onHold}`);
    await expect(page.getByTestId('order-status')).toHaveText('ON_HOLD');
    await expect(page.getByTestId('no-actions')).toContainText('not one this console knows');
  } finally {
    // The other specs read the same list: these orders leave it whatever
    // happened here (the other writer deletes its own; ours are cancelled).
    for (const id of [noTotal, onHold]) await store('DeleteItem', { Key: { PK: { S: `ORDER#${id}` } } });
    for (const id of [templateId, later]) {
      await request.post(`/api/orders/${id}/status`, {
        data: { from: 'PENDING', to: 'CANCELLED', reason: 'end of the foreign-items test' },
      });
    }
  }
  expect(errors, errors.join('\n')).toEqual([]);
});
