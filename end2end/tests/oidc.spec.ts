import { type Browser, type Page } from '@playwright/test';
import { expect, test } from './fixtures';

/** Signs in through the identity provider (the real oidc-provider on loopback). */
async function signInWithProvider(browser: Browser, baseURL: string | undefined, login: string): Promise<Page> {
  const context = await browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  await page.goto('/login');
  await page.getByTestId('single-sign-on').click();
  // The provider's own login form.
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill(`password-${login}`);
  await page.locator('button[type="submit"]').click();
  return page;
}

test('an ops user signs in through the company provider and lands on the dashboard', async ({ browser, baseURL }) => {
  const page = await signInWithProvider(browser, baseURL, 'alice');
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('who')).toContainText('oidc.alice');
  await expect(page.getByTestId('role')).toHaveText('ops');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  // Ops may act on the queue.
  await expect(page.getByTestId('bulk-confirm')).toBeVisible();
  await page.context().close();
});

test("a user whose groups lack ops cannot change a status: no button, and a forged request is refused", async ({
  browser,
  baseURL,
  request,
}) => {
  const first = await (await request.get('/api/pending?limit=1')).json();
  const orderId: string = first.orders[0].orderId;
  const page = await signInWithProvider(browser, baseURL, 'bob');
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('role')).toHaveText('viewer');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('bulk-bar')).toHaveCount(0);
  await expect(page.locator('[data-testid="pending-table"] input[type="checkbox"]')).toHaveCount(0);
  const orderPage = await page.goto(`/orders/${orderId}`);
  expect(orderPage?.status()).toBe(403);
  await expect(page.getByTestId('forbidden')).toContainText('needs the support role');
  await expect(page.getByRole('button', { name: 'Mark CONFIRMED' })).toHaveCount(0);
  const forged = await page.request.post('/api/fn/change-status', {
    headers: { Origin: baseURL!, 'Content-Type': 'application/json' },
    data: { order_id: orderId, from: 'PENDING', to: 'CONFIRMED', reason: null },
  });
  expect(forged.status()).toBe(403);
  expect((await (await request.get(`/api/orders/${orderId}`)).json()).status).toBe('PENDING');
  await page.context().close();
});

test('a user the provider knows but with no Northwind role is told so', async ({ browser, baseURL }) => {
  const page = await signInWithProvider(browser, baseURL, 'carol');
  await expect(page).toHaveURL(/\/login\?error=no-role/);
  await expect(page.getByTestId('sign-in-error')).toContainText('no Northwind Ops role');
  await page.context().close();
});

test('after single sign-on a crafted next cannot send the browser to another site', async ({ browser, baseURL }) => {
  // `/%09/` is a tab once the query is read: a browser drops it from a
  // Location and reads `//evil.example`. The app must not send it there.
  for (const next of ['/%09/evil.example', '%09//evil.example', '/%5C/evil.example', 'https:evil.example']) {
    const context = await browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
    const page = await context.newPage();
    const outside: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(baseURL!) && !r.url().startsWith('http://127.0.0.1:')) outside.push(r.url());
    });
    await page.goto(`/auth/oidc?next=${next}`);
    await page.locator('input[name="login"]').fill('alice');
    await page.locator('input[name="password"]').fill('password-alice');
    await page.locator('button[type="submit"]').click();
    await expect(page.getByTestId('role')).toHaveText('ops');
    expect(new URL(page.url()).origin).toBe(new URL(baseURL!).origin);
    expect(outside).toEqual([]);
    await context.close();
  }
});
