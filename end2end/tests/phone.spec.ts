import { type Browser, type Page } from '@playwright/test';
import { expect, test } from './fixtures';

// The narrowest phones in use are 360 px wide (CSS pixels). Every page, as
// an admin sees it (the widest header: search, Capacity, Sales, Audit, who
// and Sign out), must fit that width: nothing of the page beyond the screen's
// edge, and "Sign out" on screen.
const PHONE = { width: 360, height: 780 };

/** A page of its own at phone size, signed in as the admin through the login form. */
async function adminOnAPhone(browser: Browser, baseURL: string | undefined): Promise<Page> {
  const context = await browser.newContext({ baseURL, viewport: PHONE, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  await page.goto('/login');
  await page.getByLabel('Name').fill('e2e-admin');
  await page.getByLabel('Password').fill('e2e-password-admin');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('who')).toContainText('e2e-admin');
  return page;
}

test('at 360 px every page keeps the screen width and shows "Sign out"', async ({ browser, baseURL, request }) => {
  // A real order and its customer, for their pages.
  const listed = await (await request.get('/api/pending?days=7&limit=1')).json();
  const order = listed.orders[0];
  expect(order, 'the seeded data has a PENDING order').toBeTruthy();
  const plan = `phone-${Date.now()}`;
  const start = new Date(Date.now() + 86_400_000).toISOString();
  const created = await request.post('/api/sales', {
    data: { name: plan, peakOrdersPerSecond: 50, start, rampMinutes: 5, holdMinutes: 10, decayMinutes: 5 },
  });
  expect(created.status()).toBe(201);
  const pages = [
    '/',
    '/?stuck=1',
    `/orders/${order.orderId}`,
    `/customers/${order.customerId}`,
    `/search?q=${order.orderId}`,
    '/audit',
    '/capacity',
    '/sales',
    `/sales?plan=${plan}`,
    '/login',
    '/no-such-page',
  ];
  const page = await adminOnAPhone(browser, baseURL);
  const widths: string[] = [];
  for (const path of pages) {
    await page.goto(path);
    await expect(page.locator('html[data-hydrated="true"]')).toBeAttached();
    const signOut = page.getByTestId('sign-out');
    await expect(signOut, `${path}: Sign out`).toBeVisible();
    await expect(signOut, `${path}: Sign out on screen`).toBeInViewport({ ratio: 1 });
    const width = await page.evaluate(() => ({
      document: document.documentElement.scrollWidth,
      viewport: document.documentElement.clientWidth,
      header: document.querySelector('header.top')?.scrollWidth ?? 0,
    }));
    widths.push(`${page.url().replace(baseURL ?? '', '')}: document ${width.document} px, header ${width.header} px`);
    expect(width.document, `${path}: the document is no wider than the screen`).toBeLessThanOrEqual(width.viewport);
    expect(width.header, `${path}: the header is no wider than the screen`).toBeLessThanOrEqual(width.viewport);
  }
  console.log(`at ${PHONE.width} px:\n  ${widths.join('\n  ')}`);
  await page.context().close();
});
