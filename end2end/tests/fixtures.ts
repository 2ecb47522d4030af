import {
  test as base,
  expect,
  request as apiRequest,
  type APIRequestContext,
  type Browser,
  type Page,
  type ViewportSize,
} from '@playwright/test';
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

/** A page of its own, signed in as `name` through the login form (and at `viewport`, when given). */
export async function signedIn(
  browser: Browser,
  baseURL: string | undefined,
  name: string,
  password: string,
  viewport?: ViewportSize,
): Promise<Page> {
  const context = await browser.newContext({ baseURL, viewport, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  await page.goto('/login');
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('who')).toContainText(name);
  return page;
}
