import { type Page } from '@playwright/test';
import { expect, signedIn, test } from './fixtures';

/** The server's today, as the pages read it (UTC). */
async function serverToday(page: Page): Promise<string> {
  const metrics = await (await page.request.get('/api/metrics/pending')).json();
  return metrics.date;
}

test('the day chart draws the PENDING backlog up to now, not through the hours to come', async ({ page }) => {
  await page.goto('/');
  const chart = page.getByTestId('activity-chart');
  await expect(chart).toBeVisible();
  const points = await chart.locator('polyline.backlog').getAttribute('points');
  const xs = (points ?? '').trim().split(/\s+/).map((p) => Number(p.split(',')[0]));
  const now = new Date();
  const minutes = now.getUTCHours() * 60 + now.getUTCMinutes();
  // 720 SVG units a day; the line ends at the end of the ten minutes now is in.
  const endOfBucket = (Math.floor(minutes / 10) + 1) * 10 * (720 / 1440);
  expect(Math.max(...xs)).toBeLessThanOrEqual(endOfBucket + 0.1);
  expect(Math.max(...xs)).toBeGreaterThan(0);
});

test('at 420 px the PENDING table scrolls in its own box and the page keeps the screen width', async ({ page }) => {
  await page.setViewportSize({ width: 420, height: 900 });
  await page.goto('/');
  const table = page.getByTestId('pending-table');
  await expect(table.locator('tbody tr').first()).toBeVisible();
  const page_ = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
  }));
  expect(page_.scroll).toBeLessThanOrEqual(page_.client);
  const box = await table.evaluate((t) => ({ scroll: t.scrollWidth, client: t.clientWidth }));
  expect(box.scroll).toBeGreaterThan(box.client);
  // The header's search is on screen and takes an id.
  const search = page.getByRole('searchbox').or(page.locator('header.top .search input'));
  await expect(search.first()).toBeInViewport();
});

test('the capacity and audit pages show the day they show in their day field', async ({ browser, baseURL }) => {
  const viewer = await signedIn(browser, baseURL, 'e2e-capacity', 'e2e-password-capacity');
  const today = await serverToday(viewer);
  await viewer.goto('/capacity');
  await expect(viewer.getByTestId('day')).toHaveValue(today);
  await viewer.goto('/capacity?date=2026-01-02');
  await expect(viewer.getByTestId('day')).toHaveValue('2026-01-02');
  await viewer.context().close();

  const admin = await signedIn(browser, baseURL, 'e2e-admin', 'e2e-password-admin');
  await admin.goto('/audit');
  await expect(admin.getByTestId('day')).toHaveValue(today);
  // With JavaScript's help or without, the server-rendered field already holds it.
  const html = await (await admin.request.get('/audit')).text();
  expect(html).toContain(`value="${today}"`);
  await admin.context().close();
});
