import { expect, test as setup } from '@playwright/test';

// Every other test's pages run in this session: an ops user, signed in
// through the login form as a person would.
setup('sign in as an ops user', async ({ page }) => {
  await page.goto('/login');
  await page.getByLabel('Name').fill('e2e-ops');
  await page.getByLabel('Password').fill('e2e-password-ops');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('who')).toContainText('e2e-ops');
  await page.context().storageState({ path: '.run/ops.json' });
});
