import { defineConfig } from '@playwright/test';

// The app under test: a fresh embedded store, seeded deterministically, on
// its own port; and a real OpenID provider (oidc-provider, end2end/oidc/)
// it signs in through. Playwright starts both and stops them (by their
// pids) at the end.
const port = Number(process.env.E2E_PORT ?? 3107);
const oidcPort = Number(process.env.E2E_OIDC_PORT ?? 3108);
export const baseURL = `http://127.0.0.1:${port}`;
const issuer = `http://127.0.0.1:${oidcPort}`;
// A day long past that the e2e server seeds with a clock of its own (`seed
// --now`), besides today's orders (by the real clock): every PENDING order
// of it has waited longer than the stuck threshold whatever the time of day
// the tests run at, which today's orders have not until after midnight's
// first half hour. The queue's stuck-orders test works on it.
export const stuckDay = '2025-11-28';

export default defineConfig({
  testDir: './tests',
  timeout: 30_000,
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  outputDir: './test-results',
  projects: [
    // Signs in once through the login form; the app's tests reuse that session.
    { name: 'setup', testMatch: /.*\.setup\.ts/ },
    { name: 'app', testMatch: /.*\.spec\.ts/, dependencies: ['setup'], use: { storageState: '.run/ops.json' } },
    // The docs' screenshots (`make screenshots`): defined only when asked
    // for, so that the suite never rewrites docs/*.png.
    ...(process.env.NORTHWIND_SCREENSHOTS
      ? [{ name: 'screenshots', testMatch: /.*\.shots\.ts/, dependencies: ['setup'] }]
      : []),
  ],
  use: {
    baseURL,
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    },
  },
  webServer: [
    {
      command: `node oidc/provider.mjs`,
      env: { OIDC_PORT: String(oidcPort), OIDC_REDIRECT_URIS: `${baseURL}/auth/callback` },
      url: `${issuer}/.well-known/openid-configuration`,
      timeout: 60_000,
      reuseExistingServer: false,
      stdout: 'pipe',
      stderr: 'pipe',
    },
    {
      command: `bash ../scripts/e2e-server.sh ${port}`,
      env: { OIDC_ISSUER: issuer, E2E_STUCK_DAY: stuckDay },
      url: `${baseURL}/healthz`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: 'pipe',
      stderr: 'pipe',
    },
  ],
});
