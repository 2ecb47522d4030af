import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { createOrder, expect, signedIn, test } from './fixtures';

// The docs' screenshots, taken from the app as the suite runs it (the
// seeded demo data): `make screenshots`, which runs this file alone (the
// `screenshots` project of playwright.config.ts, defined only then). Every
// picture README.md and docs/ show is taken here; the last test says so.

const root = resolve(__dirname, '..', '..');
const WIDE = { width: 1280, height: 1150 };

/** Every picture this file takes, from the repository's root. */
const PICTURES = ['docs/capacity.png', 'docs/dashboard.png'];
function shot(path: string): string {
  expect(PICTURES, `${path} is listed in PICTURES`).toContain(path);
  return join(root, path);
}


test('docs/dashboard.png: the PENDING dashboard, live', async ({ browser, baseURL }) => {
  const page = await signedIn(browser, baseURL, 'e2e-ops', 'e2e-password-ops', WIDE);
  await page.goto('/');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('pending-table').locator('tbody tr').first()).toBeVisible();
  await expect(page.locator('.live[data-live="up"]')).toBeVisible();
  await page.screenshot({ path: shot('docs/dashboard.png') });
  await page.context().close();
});

test('docs/capacity.png: the capacity page, with this server\'s own writes', async ({ browser, baseURL, request }) => {
  // A few orders written by this server, so its own minutes show beside the seed's.
  for (let i = 0; i < 5; i++) {
    await createOrder(request, `shot-${Date.now()}-${i}`, 'cust-capacity');
  }
  const page = await signedIn(browser, baseURL, 'e2e-capacity', 'e2e-password-capacity', WIDE);
  await page.goto('/capacity');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('units-chart').first()).toBeVisible();
  await expect(page.getByTestId('heat-table')).toBeVisible();
  await page.setViewportSize({ width: WIDE.width, height: 900 });
  await page.screenshot({ path: shot('docs/capacity.png'), fullPage: true });
  await page.context().close();
});

test('every picture the README and docs/ show is taken here', async () => {
  const pages = [join(root, 'README.md')];
  const dirs = [join(root, 'docs')];
  while (dirs.length > 0) {
    const dir = dirs.pop() as string;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) dirs.push(path);
      else if (entry.name.endsWith('.md')) pages.push(path);
    }
  }
  const shown = new Set<string>();
  for (const page of pages) {
    const text = readFileSync(page, 'utf8');
    for (const match of text.matchAll(/!\[[^\]]*\]\(([^)\s]+\.(?:png|jpe?g|gif|webp))\)/g)) {
      shown.add(relative(root, resolve(join(page, '..'), match[1])));
    }
  }
  expect(shown.size, 'the docs show pictures').toBeGreaterThan(0);
  expect([...shown].sort(), 'the pictures shown are the pictures taken here').toEqual([...PICTURES].sort());
});
