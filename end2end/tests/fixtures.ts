import { test as base, expect, request as apiRequest, type APIRequestContext } from '@playwright/test';
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

export { expect };
