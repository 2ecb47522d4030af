import { expect, test } from './fixtures';
import { type Browser, type Page } from '@playwright/test';

/** A fresh browser context with nobody signed in. */
async function anonymous(browser: Browser, baseURL: string | undefined) {
  return browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
}

async function signIn(page: Page, name: string, password: string) {
  await page.goto('/login');
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test('a page asked for without a session leads to sign-in and back', async ({ browser, baseURL }) => {
  const context = await anonymous(browser, baseURL);
  const page = await context.newPage();
  await page.goto('/?limit=50');
  await expect(page).toHaveURL(/\/login\?next=\/%3Flimit%3D50$/);
  await page.getByLabel('Name').fill('e2e-support');
  await page.getByLabel('Password').fill('e2e-password-support');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/\?limit=50$/);
  await expect(page.getByTestId('who')).toContainText('e2e-support');
  await expect(page.getByTestId('role')).toHaveText('support');
  await context.close();
});

test('the sign-in page shows its icon to a visitor who is not signed in', async ({ browser, baseURL }) => {
  const context = await anonymous(browser, baseURL);
  const page = await context.newPage();
  await page.goto('/login');
  const href = await page.locator('link[rel="icon"][type="image/svg+xml"]').getAttribute('href');
  // The icon is in the page (one request fewer): a drawing the page's policy lets it show.
  expect(href).toMatch(/^data:image\/svg\+xml,/);
  const width = await page.evaluate(async (h) => {
    const image = new Image();
    image.src = h!;
    await image.decode();
    return image.naturalWidth;
  }, href);
  expect(width).toBeGreaterThan(0);
  // The same drawing is still a file, served to anyone, redirects followed.
  const [status, type, url] = await page.evaluate(async () => {
    const r = await fetch('/favicon.svg');
    return [r.status, r.headers.get('content-type'), r.url];
  });
  expect(status).toBe(200);
  expect(type).toContain('image/svg+xml');
  expect(url).toBe(`${baseURL}/favicon.svg`);
  await context.close();
});

test('a wrong password, an unknown user and a disabled user get the same message', async ({ browser, baseURL, request }) => {
  const context = await anonymous(browser, baseURL);
  const page = await context.newPage();
  const messages: string[] = [];
  for (const [name, password] of [
    ['e2e-ops', 'not the password'],
    ['nobody-here', 'e2e-password-ops'],
  ]) {
    await signIn(page, name, password);
    await expect(page.getByTestId('sign-in-error')).toBeVisible();
    messages.push((await page.getByTestId('sign-in-error').textContent()) ?? '');
  }
  // A disabled account, with its right password.
  const disabled = await request.post('/api/admin/users/e2e-viewer/disable');
  expect(disabled.status()).toBe(200);
  await signIn(page, 'e2e-viewer', 'e2e-password-viewer');
  messages.push((await page.getByTestId('sign-in-error').textContent()) ?? '');
  expect(new Set(messages).size).toBe(1);
  expect(messages[0]).toContain('did not sign you in');
  await context.close();
});

test('signing out ends the session in the store: the old cookie is refused', async ({ browser, baseURL }) => {
  const context = await anonymous(browser, baseURL);
  const page = await context.newPage();
  await signIn(page, 'e2e-admin', 'e2e-password-admin');
  await expect(page.getByTestId('role')).toHaveText('admin');
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'nwo_session');
  expect(session?.httpOnly).toBe(true);
  expect(session?.sameSite).toBe('Lax');
  expect((await page.request.get('/api/me')).status()).toBe(200);
  await page.getByTestId('sign-out').click();
  await expect(page.getByTestId('signed-out')).toBeVisible();
  // The same cookie, replayed from elsewhere, is worth nothing now.
  const replay = await browser.newContext({ baseURL, storageState: { cookies, origins: [] } });
  expect((await replay.request.get('/api/me')).status()).toBe(401);
  await replay.close();
  await context.close();
});

test('a role too low for a page is told which role it needs, and is offered nothing it cannot do', async ({
  browser,
  baseURL,
  request,
}) => {
  const first = await (await request.get('/api/pending?limit=1')).json();
  const orderId: string = first.orders[0].orderId;

  const context = await anonymous(browser, baseURL);
  const page = await context.newPage();
  await signIn(page, 'e2e-support', 'e2e-password-support');
  await page.goto(`/orders/${orderId}`);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  // Support may cancel, not confirm.
  await expect(page.getByRole('button', { name: 'Cancel order' })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Mark CONFIRMED' })).toHaveCount(0);
  const audit = await page.goto('/audit');
  expect(audit?.status()).toBe(403);
  await expect(page.getByTestId('forbidden')).toContainText('needs the admin role');
  // Asking the server directly is refused as well, from our own origin.
  const forged = await page.request.post('/api/fn/change-status', {
    headers: { Origin: baseURL!, 'Content-Type': 'application/json' },
    data: { order_id: orderId, from: 'PENDING', to: 'CONFIRMED', reason: 'forged' },
  });
  expect(forged.status()).toBe(403);
  expect((await request.get(`/api/orders/${orderId}`)).ok()).toBeTruthy();
  expect((await (await request.get(`/api/orders/${orderId}`)).json()).status).toBe('PENDING');
  await context.close();
});

test('a state-changing request with our cookie from another site is refused', async ({ page, baseURL, request }) => {
  const first = await (await request.get('/api/pending?limit=1')).json();
  const orderId: string = first.orders[0].orderId;
  await page.goto('/');
  const body = { order_id: orderId, from: 'PENDING', to: 'CANCELLED', reason: 'cross-site' };
  const evil = await page.request.post('/api/fn/change-status', {
    headers: { Origin: 'http://evil.example', 'Content-Type': 'application/json' },
    data: body,
  });
  expect(evil.status()).toBe(403);
  expect((await (await request.get(`/api/orders/${orderId}`)).json()).status).toBe('PENDING');
  // A plain HTML form's encoding is refused by the server function itself.
  const form = await page.request.post('/api/fn/change-status', {
    headers: { Origin: baseURL! },
    form: { order_id: orderId, from: 'PENDING', to: 'CANCELLED', reason: 'form' },
  });
  expect(form.status()).toBe(400);
  expect((await (await request.get(`/api/orders/${orderId}`)).json()).status).toBe('PENDING');
  // From our own origin, the ops session may.
  const ours = await page.request.post('/api/fn/change-status', {
    headers: { Origin: baseURL!, 'Content-Type': 'application/json' },
    data: body,
  });
  expect(ours.status()).toBe(200);
  expect((await (await request.get(`/api/orders/${orderId}`)).json()).status).toBe('CANCELLED');
});

test('pages carry a content security policy whose nonce is the hydration script\'s', async ({ page }) => {
  const response = await page.goto('/');
  const headers = response!.headers();
  const csp = headers['content-security-policy'];
  expect(csp).toContain("frame-ancestors 'none'");
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers['referrer-policy']).toBeTruthy();
  const nonce = /'nonce-([^']+)'/.exec(csp)![1];
  const scriptNonces = await page.locator('script[nonce]').evaluateAll((s) => s.map((x) => (x as HTMLScriptElement).nonce));
  expect(scriptNonces.length).toBeGreaterThan(0);
  expect(scriptNonces.every((n) => n === nonce)).toBeTruthy();
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
});
