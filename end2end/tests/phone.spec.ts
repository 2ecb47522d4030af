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

test('at 360 px the Sales page shows each plan as a card and stacks its form', async ({ browser, baseURL, request }) => {
  // A long name, as a plan's name may be (64 characters at most).
  const plan = `phone-sales-${Date.now()}-with-a-long-name-for-a-narrow-screen`.slice(0, 64);
  const start = new Date(Date.now() + 86_400_000).toISOString();
  const created = await request.post('/api/sales', {
    data: { name: plan, peakOrdersPerSecond: 2000, start, rampMinutes: 10, holdMinutes: 30, decayMinutes: 20 },
  });
  expect(created.status()).toBe(201);
  const page = await adminOnAPhone(browser, baseURL);
  await page.goto(`/sales?plan=${plan}`);
  await expect(page.locator('html[data-hydrated="true"]')).toBeAttached();
  await expect(page.getByTestId('readiness')).toBeVisible();
  const row = page.locator(`[data-testid="plan-row"][data-plan="${plan}"]`);
  await expect(row).toBeVisible();
  const fit = await page.evaluate(() => {
    const over = (e: Element | null) => (e ? e.scrollWidth - e.clientWidth : 0);
    // Inside a box that scrolls (or clips) sideways: within its box, not the page's.
    const boxed = (e: Element) => {
      for (let a = e.parentElement; a && a.tagName !== 'MAIN'; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
      }
      return false;
    };
    // Everything beyond the screen's edge, by its test id or tag.
    const wide = [...document.querySelectorAll('main *')]
      .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5 && !boxed(e))
      .map((e) => e.getAttribute('data-testid') ?? e.tagName.toLowerCase());
    const fields = [...document.querySelectorAll('[data-testid="plan-form"] label')].map((l) => l.getBoundingClientRect());
    return {
      document: document.documentElement.scrollWidth,
      viewport: document.documentElement.clientWidth,
      plansOverflow: over(document.querySelector('[data-testid="plans"]')),
      wide,
      // Stacked: each field starts where the first does.
      lefts: [...new Set(fields.map((f) => Math.round(f.left)))],
      fields: fields.length,
    };
  });
  console.log(
    `/sales?plan=… at ${PHONE.width} px: document ${fit.document} px, plans table overflow ${fit.plansOverflow} px, ` +
      `${fit.fields} form fields in ${fit.lefts.length} column(s)`,
  );
  expect(fit.document, 'the Sales page is no wider than the screen').toBeLessThanOrEqual(fit.viewport);
  expect(fit.wide, 'nothing of the page beyond the screen').toEqual([]);
  expect(fit.plansOverflow, 'the plans, as cards, need no scrolling').toBeLessThanOrEqual(0);
  expect(fit.fields).toBeGreaterThan(5);
  expect(fit.lefts, 'the form\'s fields stack in one column').toHaveLength(1);
  // A card's actions: each on screen, whole.
  for (const id of ['plan-check', 'plan-rehearse', 'plan-edit', 'plan-delete']) {
    const box = await row.getByTestId(id).boundingBox();
    expect(box, id).not.toBeNull();
    expect(box!.x, `${id}: its left edge on screen`).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width, `${id}: its right edge on screen`).toBeLessThanOrEqual(fit.viewport);
  }
  await page.screenshot({ path: '/tmp/salespage-360.png', fullPage: true });
  await page.context().close();
});
