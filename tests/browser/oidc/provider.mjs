// An OpenID provider for the sign-in tests: the certified `oidc-provider` package, with one
// client (the console) and the people of a JSON file the test writes and may rewrite
// between sign-ins (their password, e-mail and groups are read again at every sign-in).
//
//   node provider.mjs PORT USERS_JSON CLIENT_JSON
//
// USERS_JSON:  {"alice": {"password": "...", "email": "...", "groups": ["alpha-operators"]}}
// CLIENT_JSON: {"client_id": "...", "client_secret": "...", "redirect_uris": [...],
//               "post_logout_redirect_uris": [...]}
//
// The login form is this script's own (the package leaves it to the application): it
// checks the password, then the console's client is granted the scopes it asked for, as a
// first-party application is, without a consent page.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const [port, usersPath, clientPath] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const client = JSON.parse(readFileSync(clientPath, 'utf8'));
const people = () => JSON.parse(readFileSync(usersPath, 'utf8'));

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

async function findAccount(ctx, id) {
  const person = people()[id];
  if (!person) return undefined;
  return {
    accountId: id,
    async claims() {
      return {
        sub: id,
        email: person.email,
        email_verified: true,
        preferred_username: id,
        name: person.name || id,
        groups: person.groups || [],
      };
    },
  };
}

// The console is a first-party client: what it asks for is granted without a consent page.
async function loadExistingGrant(ctx) {
  const grantId = ctx.oidc.result?.consent?.grantId
    || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
  if (grantId) return ctx.oidc.provider.Grant.find(grantId);
  const grant = new ctx.oidc.provider.Grant({
    clientId: ctx.oidc.client.clientId,
    accountId: ctx.oidc.session.accountId,
  });
  grant.addOIDCScope(ctx.oidc.params.scope);
  await grant.save();
  return grant;
}

const provider = new Provider(issuer, {
  clients: [{
    client_id: client.client_id,
    client_secret: client.client_secret,
    redirect_uris: client.redirect_uris,
    post_logout_redirect_uris: client.post_logout_redirect_uris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  pkce: { required: () => true },
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount,
  loadExistingGrant,
});

function loginPage(uid, error = '') {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Test provider: sign in</title></head>
<body><h1>Sign in to the test provider</h1>${error ? `<p role="alert">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Username <input name="username" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form></body></html>`;
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// The interaction pages, in front of the provider's own routes.
provider.use(async (ctx, next) => {
  const match = ctx.path.match(/^\/interaction\/([^/]+)(\/login)?$/);
  if (!match) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  // Consent is granted by loadExistingGrant: the login form is all this provider asks.
  if (details.prompt.name !== 'login') ctx.throw(501, `unexpected prompt ${details.prompt.name}`);
  ctx.type = 'html';
  ctx.set('Cache-Control', 'no-store');
  if (ctx.method === 'GET' && !match[2]) {
    ctx.body = loginPage(details.uid);
    return undefined;
  }
  if (ctx.method !== 'POST' || !match[2]) ctx.throw(405);
  const form = await readForm(ctx.req);
  const username = form.get('username') || '';
  const person = people()[username];
  if (!person || person.password !== form.get('password')) {
    ctx.status = 401;
    ctx.body = loginPage(details.uid, 'Wrong username or password.');
    return undefined;
  }
  return provider.interactionFinished(ctx.req, ctx.res, {
    login: { accountId: username },
  }, { mergeWithLastSubmission: false });
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`listening on ${issuer}`);
});
