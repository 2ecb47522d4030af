// A real OpenID Connect provider for the browser tests: panva's certified
// `oidc-provider`, on loopback, plain http, in memory, with one confidential
// client (the app) and a few test users.
//
//   node end2end/oidc/provider.mjs
//
// Once it listens it prints exactly one line to stdout,
//
//   oidc provider listening on http://127.0.0.1:<port>
//
// and that URL, exactly (no trailing slash), is the issuer. Everything else it
// has to say goes to stderr. It writes no pid file: whoever starts it stops it
// by the pid of the node process it started (SIGTERM or SIGINT; it closes its
// server and exits 0).
//
// Environment (all optional):
//   OIDC_PORT           port to listen on; 0 (the default) picks a free one
//   OIDC_CLIENT_ID      the client's id (default northwind-ops)
//   OIDC_CLIENT_SECRET  the client's secret (default northwind-test-secret)
//   OIDC_REDIRECT_URIS  comma-separated redirect URIs
//                       (default http://127.0.0.1:3107/auth/callback)
//   OIDC_POST_LOGOUT_REDIRECT_URIS  comma-separated, for RP-initiated logout
//                       (default none)
//
// What the app sees (see README.md next to this file for more):
//   - authorization code flow only, PKCE (S256) required, nonce passed through;
//   - client authentication with the secret, by client_secret_basic or
//     client_secret_post (oidc-provider accepts either for a client registered
//     with one of the two);
//   - the ID token carries the claims of the requested scopes (profile: name,
//     preferred_username; email: email, email_verified; groups: groups),
//     not only the userinfo endpoint;
//   - our own login page at /interaction/<uid>: input[name=login],
//     input[name=password], button[type=submit]; a wrong password re-renders
//     it with #login-error and status 401;
//   - no consent screen: the client is first-party, consent is implied.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

// Each start-up step, with the time since Node.js started, to stderr: a
// start that stalls (seen once, after the 21-minute Rust suite: no
// "listening" line within 20 s) then names the step it stalled in.
function startedStep(what) {
  console.error(`oidc provider: ${what} at ${Math.round(process.uptime() * 1000)} ms`);
}

// oidc-provider prints notices with console.info (stdout). The stdout of this
// process is reserved for the one "listening" line, so send everything that
// goes through console.log/console.info to stderr, before the module loads.
console.log = console.error;
console.info = console.error;

// Imported dynamically so that the console redirection above is in place
// first (static imports would be evaluated before it). On Node.js 20,
// oidc-provider 9 prints (to stderr) that it wants Node.js 22; it runs fine
// on 20.20 (smoke.mjs exercises the whole flow).
const { default: Provider, errors } = await import('oidc-provider');
startedStep('oidc-provider imported');

// ---------------------------------------------------------------------------
// Settings

function envList(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  return raw.split(',').map((s) => s.trim()).filter(Boolean);
}

const port = Number(process.env.OIDC_PORT ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`OIDC_PORT must be a port number, not ${JSON.stringify(process.env.OIDC_PORT)}`);
  process.exit(2);
}
const clientId = process.env.OIDC_CLIENT_ID || 'northwind-ops';
const clientSecret = process.env.OIDC_CLIENT_SECRET || 'northwind-test-secret';
const redirectUris = envList('OIDC_REDIRECT_URIS', ['http://127.0.0.1:3107/auth/callback']);
const postLogoutRedirectUris = envList('OIDC_POST_LOGOUT_REDIRECT_URIS', []);

// ---------------------------------------------------------------------------
// Test users. The account id is the login name and becomes the `sub` claim.
// Every password is `password-<login>`.

const USERS = [
  { login: 'alice', name: 'Alice Ops', email: 'alice@example.test', groups: ['northwind-ops'] },
  { login: 'bob', name: 'Bob Viewer', email: 'bob@example.test', groups: ['northwind-viewer'] },
  // Signs in fine, but has no role in the app.
  { login: 'carol', name: 'Carol Nobody', email: undefined, groups: ['unrelated'] },
].map((u) => ({ ...u, password: `password-${u.login}` }));

const usersByLogin = new Map(USERS.map((u) => [u.login, u]));

// Constant-time comparison, so that even the test provider does not leak
// password prefixes through timing.
function passwordMatches(user, given) {
  const a = crypto.createHash('sha256').update(user.password).digest();
  const b = crypto.createHash('sha256').update(String(given)).digest();
  return crypto.timingSafeEqual(a, b);
}

// oidc-provider asks for claims here; it then releases only those that the
// granted scopes map to (see `claims` below), so returning all is fine.
function accountFor(user) {
  return {
    accountId: user.login,
    async claims() {
      return {
        sub: user.login,
        name: user.name,
        preferred_username: user.login,
        ...(user.email ? { email: user.email, email_verified: true } : {}),
        groups: [...user.groups],
      };
    },
  };
}

// ---------------------------------------------------------------------------
// Keys: a fresh RS256 signing key each start, never on disk. The ID token's
// `kid` matches the one published at /jwks.

function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  startedStep('signing key generated');
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: `test-${crypto.randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
}

// ---------------------------------------------------------------------------
// HTML (login form and error page). Stable names for Playwright:
//   input[name="login"], input[name="password"], button[type="submit"],
//   #login-error (wrong password), #oidc-error (any provider error page).

function esc(value) {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  })[c]);
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>${esc(title)}</title></head>
<body>
${body}
</body>
</html>
`;
}

function loginPage({ uid, clientName, login, error }) {
  return page('Sign in - test OpenID provider', `<h1>Sign in</h1>
<p>to continue to <strong>${esc(clientName)}</strong> (test OpenID provider)</p>
${error ? `<p id="login-error" role="alert">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
  <label for="login">Username</label>
  <input id="login" name="login" type="text" value="${esc(login)}" autofocus required>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" required>
  <button type="submit">Sign in</button>
</form>
<p><a id="cancel" href="/interaction/${esc(uid)}/abort">Cancel</a></p>`);
}

function errorPage(error, description) {
  return page('Error - test OpenID provider', `<h1 id="oidc-error">${esc(error)}</h1>
<p id="oidc-error-description">${esc(description)}</p>`);
}

// ---------------------------------------------------------------------------
// The provider needs its issuer at construction, and with OIDC_PORT=0 the
// port is known only once the server listens, so listen first and attach the
// provider's request handler afterwards.

const server = http.createServer();
try {
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
} catch (err) {
  console.error(`oidc provider: cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(1);
}
const issuer = `http://127.0.0.1:${server.address().port}`;
startedStep('port open');

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    client_name: 'Northwind Ops',
    redirect_uris: redirectUris,
    post_logout_redirect_uris: postLogoutRedirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    // oidc-provider treats client_secret_basic and client_secret_post as
    // interchangeable for a client registered with either one, so both work.
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
  }],

  jwks: { keys: [signingKey()] },

  // Cookies are scoped by host, not port: the app on 127.0.0.1:3107 and this
  // provider on 127.0.0.1:<port> see each other's cookies. Names of our own
  // keep them apart from the app's (oidc-provider's are _session,
  // _interaction, _interaction_resume). The keys sign them (a `.sig` cookie
  // beside each); fresh per start, like everything else. No `secure` flag:
  // oidc-provider sets it only on https.
  cookies: {
    names: {
      session: 'oidc_op_session',
      interaction: 'oidc_op_interaction',
      resume: 'oidc_op_resume',
    },
    keys: [crypto.randomBytes(32).toString('base64url')],
  },

  async findAccount(ctx, sub) {
    const user = usersByLogin.get(sub);
    return user ? accountFor(user) : undefined;
  },

  // Which claims each scope releases. A key with an array value is a scope;
  // the Rust client asks for `openid profile email groups`.
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  scopes: ['openid', 'profile', 'email', 'groups'],

  // By default (OIDC Core 5.4) scope-requested claims go only to userinfo when
  // an access token is issued too; false puts them in the ID token as well.
  conformIdTokenClaims: false,

  // Advertise (and allow) only what the app uses.
  responseTypes: ['code'],
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],

  // PKCE for every authorization request (oidc-provider only knows S256).
  pkce: { required: () => true },

  features: {
    // Our own login form below instead of the built-in one, which takes any
    // password.
    devInteractions: { enabled: false },
    userinfo: { enabled: true },
    // RP-initiated logout at /session/end (needs OIDC_POST_LOGOUT_REDIRECT_URIS
    // to come back to the app). Plain pages of our own: the defaults load a
    // web font from the internet.
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out - test OpenID provider', `<h1>Sign out?</h1>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out - test OpenID provider', '<h1 id="signed-out">Signed out</h1>');
      },
    },
  },

  // First-party client: no consent screen. When oidc-provider looks for an
  // existing grant for the signed-in user, hand it one covering everything
  // that was requested, so the consent prompt never fires.
  async loadExistingGrant(ctx) {
    const { oidc } = ctx;
    const accountId = oidc.session.accountId;
    const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
    let grant = grantId ? await oidc.provider.Grant.find(grantId) : undefined;
    if (!grant || grant.accountId !== accountId) {
      grant = new oidc.provider.Grant({ accountId, clientId: oidc.client.clientId });
    }
    grant.addOIDCScope(oidc.requestParamOIDCScopes);
    if (oidc.requestParamClaims.size) grant.addOIDCClaims([...oidc.requestParamClaims]);
    await grant.save();
    return grant;
  },

  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = errorPage(out.error, out.error_description);
  },

  // Set explicitly (values at or below the defaults) so that oidc-provider
  // has no "you SHOULD change this" notices to print.
  clientBasedCORS: () => false,
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 3600,
    Session: 24 * 3600,
    Grant: 24 * 3600,
  },
});

// Failures the app's tests might want to understand (a rejected client
// secret, a bad PKCE verifier, ...) are logged to stderr, one line each.
for (const event of ['authorization.error', 'grant.error', 'userinfo.error', 'end_session.error', 'server_error']) {
  provider.on(event, (ctx, err) => {
    const detail = err.error_description ? `: ${err.error_description}` : '';
    console.error(`oidc provider ${event}: ${err.message}${detail}`);
  });
}

// ---------------------------------------------------------------------------
// Interactions. oidc-provider redirects the browser to /interaction/<uid>
// when the user must sign in; the interaction itself is found through a
// cookie it set for that path. We show the form, check the password, and
// hand the result back with interactionResult (which returns the URL that
// resumes the authorization request).

async function readForm(req, limit = 16 * 1024) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > limit) throw new Error('form too large');
  }
  return new URLSearchParams(body);
}

async function finish(ctx, result) {
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, {
    mergeWithLastSubmission: false,
  });
  ctx.status = 303;
  ctx.redirect(returnTo);
}

provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([\w-]+)(?:\/(login|abort))?$/.exec(ctx.path);
  if (!match) return next();
  const [, uid, action] = match;
  ctx.set('cache-control', 'no-store');

  try {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.uid !== uid) {
      throw new errors.SessionNotFound('interaction cookie does not match the URL');
    }
    const { prompt, params } = details;

    if (action === 'abort' && ctx.method === 'GET') {
      return finish(ctx, { error: 'access_denied', error_description: 'End-User aborted interaction' });
    }

    if (prompt.name === 'consent') {
      // Not expected (loadExistingGrant grants everything), but should it
      // happen, consent on the user's behalf rather than show a screen.
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
      if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
      if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
      const grantId = await grant.save();
      const returnTo = await provider.interactionResult(ctx.req, ctx.res, { consent: { grantId } });
      ctx.status = 303;
      return ctx.redirect(returnTo);
    }

    if (prompt.name !== 'login') {
      throw new Error(`unexpected interaction prompt ${prompt.name}`);
    }

    const client = await provider.Client.find(params.client_id);
    const clientName = client?.clientName ?? params.client_id;

    if (action === undefined && ctx.method === 'GET') {
      ctx.type = 'html';
      ctx.body = loginPage({ uid, clientName, login: params.login_hint ?? '' });
      return undefined;
    }

    if (action === 'login' && ctx.method === 'POST') {
      const form = await readForm(ctx.req);
      const login = form.get('login') ?? '';
      const user = usersByLogin.get(login);
      if (!user || !passwordMatches(user, form.get('password') ?? '')) {
        console.error(`oidc provider: failed sign-in for ${JSON.stringify(login)}`);
        ctx.status = 401;
        ctx.type = 'html';
        ctx.body = loginPage({ uid, clientName, login, error: 'Invalid username or password.' });
        return undefined;
      }
      return finish(ctx, { login: { accountId: user.login, amr: ['pwd'] } });
    }

    ctx.status = 405;
    ctx.type = 'html';
    ctx.body = errorPage('method_not_allowed', `${ctx.method} ${ctx.path}`);
    return undefined;
  } catch (err) {
    if (err instanceof errors.SessionNotFound) {
      ctx.status = err.status;
      ctx.type = 'html';
      ctx.body = errorPage(err.message, err.error_description);
      return undefined;
    }
    throw err;
  }
});

server.on('request', provider.callback());

// ---------------------------------------------------------------------------
// Ready, and how to stop.

process.stdout.write(`oidc provider listening on ${issuer}\n`);

let stopping = false;
function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.error(`oidc provider: ${signal}, stopping`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  // Should something hang on to the server, do not hang on to the process.
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
