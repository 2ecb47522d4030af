import AxeBuilder from '@axe-core/playwright';
import { type Browser, type Page } from '@playwright/test';
import { createOrder, expect, test } from './fixtures';

/** A viewer's browser (the lowest role that may see capacity), with an
 * account of its own: the sign-in tests disable e2e-viewer. */
async function viewer(browser: Browser, baseURL: string | undefined): Promise<Page> {
  const context = await browser.newContext({ baseURL, storageState: { cookies: [], origins: [] } });
  const page = await context.newPage();
  await page.goto('/login?next=/capacity');
  await page.getByLabel('Name').fill('e2e-capacity');
  await page.getByLabel('Password').fill('e2e-password-capacity');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/^[^?]*\/capacity$/);
  return page;
}

/** A number as the page prints it ("1,234.5"). */
function figure(text: string | null): number {
  return Number((text ?? '').replace(/[^0-9.]/g, ''));
}

test('a viewer sees the units, heat, plan and advice of real writes, and the page is accessible', async ({
  browser,
  baseURL,
  request,
}) => {
  // A few orders written by this server, so its own (unflushed) minutes show.
  for (let i = 0; i < 5; i++) {
    await createOrder(request, `capacity-e2e-${Date.now()}-${i}`, 'cust-capacity');
  }
  const page = await viewer(browser, baseURL);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('who')).toContainText('e2e-capacity');
  await expect(page.getByTestId('role')).toHaveText('viewer');

  // Units per table and index: GSI2 took writes (the orders above entered PENDING).
  const gsi2 = page.locator('[data-testid="units-table"] tr[data-resource$="/GSI2"]');
  await expect(gsi2).toHaveCount(1);
  expect(figure(await gsi2.getByTestId('write-units').textContent())).toBeGreaterThan(0);
  const table = page.locator('[data-testid="units-table"] tr[data-resource="northwind-orders"]');
  expect(figure(await table.getByTestId('write-units').textContent())).toBeGreaterThan(0);
  // Every reader of the counters and the consumer's checkpoints reads the metrics table.
  const metrics = page.locator('[data-testid="units-table"] tr[data-resource="northwind-metrics"]');
  expect(figure(await metrics.getByTestId('read-units').textContent())).toBeGreaterThan(0);
  await expect(page.getByTestId('units-chart').first()).toBeVisible();

  // The day's shard heat names its hottest shard-minute; planner and advisor show.
  await expect(page.getByTestId('heat-table')).toBeVisible();
  await expect(page.getByTestId('hottest')).toContainText('shard');
  await expect(page.getByTestId('plan-shards')).toBeVisible();
  await expect(page.getByTestId('advice-table').getByTestId('mode').first()).toHaveText(/on-demand|provisioned/i);

  // The same figures as JSON, with the viewer's session.
  const json = await (await page.request.get('/api/capacity')).json();
  expect(json.resources.some((r: { resource: string }) => r.resource.endsWith('/GSI2'))).toBe(true);

  const results = await new AxeBuilder({ page }).analyze();
  const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(serious.map((v) => `${v.id}: ${v.help}`)).toEqual([]);

  // The README's picture of the page: `NORTHWIND_SCREENSHOTS=1 npx playwright test capacity`.
  if (process.env.NORTHWIND_SCREENSHOTS) {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.screenshot({ path: '../docs/capacity.png', fullPage: true });
  }
  await page.context().close();
});
