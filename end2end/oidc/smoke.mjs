// Smoke test for provider.mjs, without the app and without a browser:
//
//   node end2end/oidc/smoke.mjs
//
// It starts the provider as a child process, learns its port from the one
// line it prints, and walks the authorization code flow with PKCE as a
// browser would (plain fetch, redirects followed by hand, a small cookie
// jar), then plays the app's part at the token endpoint. It checks the ID
// token's claims and signature, that a wrong password yields no code, and a
// few refusals (no PKCE, wrong verifier, wrong secret). At the end it stops
// the provider by its pid. Exit status 0 means everything passed.

import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const CLIENT_ID = 'northwind-ops';
const CLIENT_SECRET = 'northwind-test-secret';
// Never contacted: the flow stops at the redirect to it, as the app would
// receive it.
const REDIRECT_URI = 'http://127.0.0.1:3107/auth/callback';
const SCOPE = 'openid profile email groups';

const providerPath = fileURLToPath(new URL('./provider.mjs', import.meta.url));
const b64url = (buf) => Buffer.from(buf).toString('base64url');
const random = () => b64url(crypto.randomBytes(32));

// ---------------------------------------------------------------------------
// The provider, as a child process.

let child;
let childStderr = '';

function startProvider() {
  child = spawn(process.execPath, [providerPath], {
    env: {
      ...process.env,
      OIDC_PORT: '0',
      OIDC_CLIENT_ID: CLIENT_ID,
      OIDC_CLIENT_SECRET: CLIENT_SECRET,
      OIDC_REDIRECT_URIS: `${REDIRECT_URI},http://127.0.0.1:3107/other`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { childStderr += d; });

  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('provider did not report listening within 20s')), 20_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`provider exited early (code ${code}, signal ${signal})`));
    });
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('oidc provider listening on '));
      if (line) {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        // Only that one line is expected on stdout.
        const m = /^oidc provider listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(line);
        if (!m) reject(new Error(`unexpected stdout line ${JSON.stringify(line)}`));
        else resolve(m[1]);
      }
    });
  });
}

async function stopProvider() {
  if (!child || child.exitCode !== null || child.signalCode !== null) return undefined;
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  process.kill(child.pid, 'SIGTERM');
  const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 5000).unref());
  const result = await Promise.race([exited, timeout]);
  if (result === null) {
    process.kill(child.pid, 'SIGKILL');
    throw new Error('provider did not stop within 5s of SIGTERM');
  }
  return result;
}

// ---------------------------------------------------------------------------
// A browser, as far as this flow needs one: a cookie jar honouring Path and
// deletion, and redirects followed by hand so that we can stop at the one
// that goes to the app.

class Browser {
  cookies = new Map(); // name -> { value, path }

  store(res) {
    for (const header of res.headers.getSetCookie()) {
      const [pair, ...attrs] = header.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      let path = '/';
      let expired = value === '';
      for (const attr of attrs) {
        const [k, v = ''] = attr.split('=');
        const key = k.toLowerCase();
        if (key === 'path') path = v || '/';
        if (key === 'expires' && Date.parse(v) <= Date.now()) expired = true;
        if (key === 'max-age' && Number(v) <= 0) expired = true;
      }
      const id = `${name}\u0000${path}`;
      if (expired) this.cookies.delete(id);
      else this.cookies.set(id, { name, value, path });
    }
  }

  cookieHeader(url) {
    const { pathname } = new URL(url);
    return [...this.cookies.values()]
      .filter((c) => pathname === c.path || pathname.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  // Requests `url`, then follows redirects until a page is returned or the
  // next hop would leave the provider for the app's redirect URI.
  async go(url, { method = 'GET', form } = {}) {
    for (let hop = 0; hop < 15; hop += 1) {
      const headers = { accept: 'text/html' };
      const cookie = this.cookieHeader(url);
      if (cookie) headers.cookie = cookie;
      let body;
      if (form) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        body = new URLSearchParams(form).toString();
      }
      const res = await fetch(url, { method, headers, body, redirect: 'manual' });
      this.store(res);
      if (res.status >= 300 && res.status < 400) {
        const next = new URL(res.headers.get('location'), url).href;
        await res.arrayBuffer();
        if (next.startsWith(`${REDIRECT_URI}?`) || next === REDIRECT_URI) {
          return { redirectedTo: new URL(next) };
        }
        url = next;
        method = 'GET';
        form = undefined;
        continue;
      }
      return { url, status: res.status, html: await res.text() };
    }
    throw new Error('too many redirects');
  }
}

// ---------------------------------------------------------------------------
// The flow.

function authorizationUrl(discovery, params) {
  const url = new URL(discovery.authorization_endpoint);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.href;
}

function loginForm(page) {
  assert.equal(page.status, 200, `expected the login page, got ${page.status} at ${page.url}`);
  assert.match(page.url, /\/interaction\/[\w-]+$/, 'login page URL');
  assert.match(page.html, /<input[^>]*name="login"/, 'input[name=login]');
  assert.match(page.html, /<input[^>]*name="password"[^>]*type="password"/, 'input[name=password]');
  assert.match(page.html, /<button type="submit"/, 'button[type=submit]');
  const action = /<form method="post" action="([^"]+)"/.exec(page.html)?.[1];
  assert.ok(action, 'form action');
  return new URL(action, page.url).href;
}

// Signs in as `login` with `password` in a fresh browser; returns the
// redirect to the app (or the page shown instead) and the PKCE/nonce values.
async function signIn(discovery, login, password, extra = {}) {
  const browser = new Browser();
  const verifier = random();
  const request = {
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    scope: SCOPE,
    state: random(),
    nonce: random(),
    code_challenge: b64url(crypto.createHash('sha256').update(verifier).digest()),
    code_challenge_method: 'S256',
    ...extra,
  };
  const first = await browser.go(authorizationUrl(discovery, request));
  if (first.redirectedTo) return { ...first, request, verifier, browser };
  const action = loginForm(first);
  const after = await browser.go(action, { method: 'POST', form: { login, password } });
  return { ...after, request, verifier, browser };
}

function basicAuth(id, secret) {
  // RFC 6749 2.3.1: form-encode each part before base64.
  const enc = (s) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64')}`;
}

async function redeem(discovery, code, verifier, { method = 'client_secret_basic', secret = CLIENT_SECRET } = {}) {
  const form = {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    ...(verifier === undefined ? {} : { code_verifier: verifier }),
  };
  const headers = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (method === 'client_secret_basic') {
    headers.authorization = basicAuth(CLIENT_ID, secret);
  } else {
    form.client_id = CLIENT_ID;
    form.client_secret = secret;
  }
  const res = await fetch(discovery.token_endpoint, {
    method: 'POST', headers, body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, json: await res.json() };
}

async function verifyIdToken(discovery, idToken) {
  const [h, p, s] = idToken.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const payload = JSON.parse(Buffer.from(p, 'base64url'));
  assert.equal(header.alg, 'RS256', 'ID token alg');
  const jwks = await (await fetch(discovery.jwks_uri)).json();
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  assert.ok(jwk, `ID token kid ${header.kid} is in the JWKS`);
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  assert.ok(
    crypto.verify('sha256', Buffer.from(`${h}.${p}`), key, Buffer.from(s, 'base64url')),
    'ID token signature verifies against the JWKS',
  );
  return payload;
}

// A whole successful sign-in, checked step by step; returns the ID token
// payload.
async function fullFlow(discovery, issuer, login, method) {
  const result = await signIn(discovery, login, `password-${login}`);
  assert.ok(result.redirectedTo, `${login}: expected a redirect to the app, got ${result.status} at ${result.url}`);
  const params = result.redirectedTo.searchParams;
  assert.ok(params.get('code'), `${login}: code in the redirect`);
  assert.equal(params.get('state'), result.request.state, `${login}: state round-trips`);
  assert.equal(params.get('iss'), issuer, `${login}: RFC 9207 iss in the redirect`);
  assert.equal(params.get('error'), null);

  const token = await redeem(discovery, params.get('code'), result.verifier, { method });
  assert.equal(token.status, 200, `${login}: token endpoint with ${method}: ${JSON.stringify(token.json)}`);
  assert.equal(token.json.token_type, 'Bearer');
  assert.ok(token.json.access_token, 'access_token');
  assert.ok(token.json.id_token, 'id_token');
  assert.deepEqual(token.json.scope.split(' ').sort(), SCOPE.split(' ').sort(), 'granted scope');

  const claims = await verifyIdToken(discovery, token.json.id_token);
  assert.equal(claims.iss, issuer, 'iss');
  assert.equal(claims.aud, CLIENT_ID, 'aud');
  assert.equal(claims.sub, login, 'sub');
  assert.equal(claims.nonce, result.request.nonce, 'nonce');
  assert.equal(claims.preferred_username, login, 'preferred_username');
  assert.ok(claims.name, 'name');
  assert.ok(Array.isArray(claims.groups), 'groups is an array');

  // Userinfo agrees.
  const userinfo = await fetch(discovery.userinfo_endpoint, {
    headers: { authorization: `Bearer ${token.json.access_token}` },
  });
  assert.equal(userinfo.status, 200);
  const info = await userinfo.json();
  assert.equal(info.sub, login);
  assert.deepEqual(info.groups, claims.groups);

  // The code is single use; and replaying it revokes what it was exchanged
  // for (oidc-provider revokes the grant), so the access token dies too.
  const again = await redeem(discovery, params.get('code'), result.verifier, { method });
  assert.equal(again.status, 400, 'a code redeemed twice');
  assert.equal(again.json.error, 'invalid_grant');
  const revoked = await fetch(discovery.userinfo_endpoint, {
    headers: { authorization: `Bearer ${token.json.access_token}` },
  });
  assert.equal(revoked.status, 401, 'access token revoked after code replay');

  console.log(`ok - ${login} signs in (${method}); ID token: ${JSON.stringify(claims)}`);
  return claims;
}

async function main() {
  const issuer = await startProvider();
  console.log(`ok - provider started, issuer ${issuer}`);

  const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
  assert.equal(discovery.issuer, issuer, 'discovery issuer is exactly the printed URL');
  assert.ok(discovery.code_challenge_methods_supported.includes('S256'));
  for (const m of ['client_secret_basic', 'client_secret_post']) {
    assert.ok(discovery.token_endpoint_auth_methods_supported.includes(m), m);
  }
  console.log('ok - discovery document');

  const alice = await fullFlow(discovery, issuer, 'alice', 'client_secret_basic');
  assert.deepEqual(alice.groups, ['northwind-ops']);
  assert.equal(alice.name, 'Alice Ops');
  assert.equal(alice.email, 'alice@example.test');
  assert.equal(alice.email_verified, true);

  const bob = await fullFlow(discovery, issuer, 'bob', 'client_secret_post');
  assert.deepEqual(bob.groups, ['northwind-viewer']);
  assert.equal(bob.name, 'Bob Viewer');
  assert.equal(bob.email, 'bob@example.test');

  const carol = await fullFlow(discovery, issuer, 'carol', 'client_secret_basic');
  assert.deepEqual(carol.groups, ['unrelated']);
  assert.equal(carol.name, 'Carol Nobody');
  assert.equal(carol.email, undefined);

  // Wrong password (and unknown user): the form comes back with an error, no
  // redirect, no code.
  for (const [login, password] of [['alice', 'password-bob'], ['mallory', 'password-mallory']]) {
    const bad = await signIn(discovery, login, password);
    assert.equal(bad.redirectedTo, undefined, `${login}/${password} must not reach the app`);
    assert.equal(bad.status, 401);
    assert.match(bad.html, /id="login-error"/);
    assert.match(bad.html, /<input[^>]*name="password"/);
  }
  console.log('ok - a wrong password or unknown user gets the form back, no code');

  // Cancel on the login page: the app gets access_denied, no code.
  {
    const browser = new Browser();
    const page = await browser.go(authorizationUrl(discovery, {
      response_type: 'code', client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, scope: SCOPE,
      state: 'cancelled', code_challenge: random(), code_challenge_method: 'S256',
    }));
    loginForm(page);
    const href = /<a id="cancel" href="([^"]+)"/.exec(page.html)?.[1];
    const r = await browser.go(new URL(href, page.url).href);
    assert.equal(r.redirectedTo?.searchParams.get('error'), 'access_denied');
    assert.equal(r.redirectedTo.searchParams.get('state'), 'cancelled');
    assert.equal(r.redirectedTo.searchParams.get('code'), null);
  }
  console.log('ok - cancel sends access_denied to the app');

  // A redirect URI that is not registered exactly gets an error page at the
  // provider, not a redirect.
  {
    const r = await new Browser().go(authorizationUrl(discovery, {
      response_type: 'code', client_id: CLIENT_ID, redirect_uri: `${REDIRECT_URI}/x`, scope: SCOPE,
      state: 's', code_challenge: random(), code_challenge_method: 'S256',
    }));
    assert.equal(r.redirectedTo, undefined);
    assert.equal(r.status, 400);
    assert.match(r.html, /id="oidc-error">invalid_redirect_uri</);
  }
  console.log('ok - an unregistered redirect_uri is refused at the provider');

  // Only the scopes asked for are released: no groups scope, no groups claim.
  {
    const r = await signIn(discovery, 'alice', 'password-alice', { scope: 'openid' });
    const t = await redeem(discovery, r.redirectedTo.searchParams.get('code'), r.verifier);
    const claims = await verifyIdToken(discovery, t.json.id_token);
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.groups, undefined);
    assert.equal(claims.name, undefined);
  }
  console.log('ok - scope openid alone releases only sub');

  // PKCE is required: no code_challenge, and the app gets an error, no code.
  {
    const r = await signIn(discovery, 'alice', 'password-alice', {
      code_challenge: undefined, code_challenge_method: undefined,
    });
    assert.ok(r.redirectedTo, 'an error redirect to the app');
    assert.equal(r.redirectedTo.searchParams.get('code'), null);
    assert.equal(r.redirectedTo.searchParams.get('error'), 'invalid_request');
  }
  console.log('ok - an authorization request without PKCE is refused');

  // The code needs the right verifier, and the client its secret.
  {
    const r = await signIn(discovery, 'alice', 'password-alice');
    const code = r.redirectedTo.searchParams.get('code');
    const wrongSecret = await redeem(discovery, code, r.verifier, { secret: 'not-the-secret' });
    assert.equal(wrongSecret.status, 401);
    assert.equal(wrongSecret.json.error, 'invalid_client');
    const noVerifier = await redeem(discovery, code, undefined);
    assert.equal(noVerifier.status, 400);
    assert.equal(noVerifier.json.error, 'invalid_grant');
  }
  {
    const r = await signIn(discovery, 'alice', 'password-alice');
    const wrongVerifier = await redeem(discovery, r.redirectedTo.searchParams.get('code'), random());
    assert.equal(wrongVerifier.status, 400);
    assert.equal(wrongVerifier.json.error, 'invalid_grant');
  }
  console.log('ok - wrong secret, missing or wrong code_verifier are refused');

  // A second authorization in the same browser is answered from the session
  // (no login form) - what the app sees when the user signs in again.
  {
    const r = await signIn(discovery, 'bob', 'password-bob');
    const again = await r.browser.go(authorizationUrl(discovery, {
      ...r.request, state: random(), nonce: random(),
    }));
    assert.ok(again.redirectedTo?.searchParams.get('code'), 'single sign-on: straight back with a code');
  }
  console.log('ok - an existing session signs in again without the form');

  const stopped = await stopProvider();
  assert.deepEqual(stopped, { code: 0, signal: null }, 'provider exits 0 on SIGTERM');
  console.log('ok - provider stopped by its pid, exit 0');
}

try {
  await main();
  console.log('smoke: all passed');
} catch (err) {
  console.error('smoke: FAILED');
  console.error(err);
  if (childStderr) console.error(`--- provider stderr ---\n${childStderr}`);
  try { await stopProvider(); } catch (stopErr) { console.error(stopErr); }
  process.exitCode = 1;
}
