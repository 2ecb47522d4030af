import { test as base, expect, request as apiRequest, type APIRequestContext } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The admin API token e2e-server.sh made for the tests. */
export function adminToken(): string {
  return readFileSync(join(__dirname, '..', '.run', 'admin-token'), 'utf8').trim();
}

/**
 * Pages run signed in as an ops user (the session the setup project saved);
 * `request` calls the JSON API as a script would, with an admin token (a
 * bearer token, so no cookie and no cross-site check).
 */
export const test = base.extend<{ request: APIRequestContext }>({
  request: async ({ baseURL }, use) => {
    const context = await apiRequest.newContext({
      baseURL,
      extraHTTPHeaders: { Authorization: `Bearer ${adminToken()}` },
    });
    await use(context);
    await context.dispose();
  },
});

/** Creates a PENDING order through the API, as a checkout would. */
export async function createOrder(request: APIRequestContext, orderId: string, customerId = 'cust-live') {
  const created = await request.post('/api/orders', {
    data: {
      orderId,
      customerId,
      currency: 'USD',
      items: [{ sku: 'TENT-2P', name: 'Ridgeline 2-person tent', quantity: 1, unitPrice: 24900 }],
      shippingCity: 'Seattle',
      shippingCountry: 'US',
    },
  });
  expect(created.status()).toBe(201);
}

export { expect };
