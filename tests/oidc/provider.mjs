// A certified OpenID provider (panva's oidc-provider) on a loopback port, for tests/serve_ui.rs.
//
// Usage: node provider.mjs <folder holding node_modules> <redirect URI> <client secret>
// Prints "issuer <URL>" once it listens; runs until killed. Whoever signs in on its login page
// (any login, any password) gets an access token for the resource asked for (RFC 8707), as a
// JWT with the claims agentprocess reads: org "acme", kind "person", email = the login, groups
// ["staff"].

import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [depsDir, redirectUri, clientSecret] = process.argv.slice(2);
const { default: Provider } = await import(
  pathToFileURL(path.join(depsDir, 'node_modules', 'oidc-provider', 'lib', 'index.js')).href
);

let handler = (_req, res) => { res.statusCode = 503; res.end(); };
const server = http.createServer((req, res) => handler(req, res));
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'agentprocess-ui',
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  scopes: ['openid', 'agentprocess'],
  cookies: { keys: ['agentprocess test cookie key'] },
  pkce: { required: () => true },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, email: id }) }),
  extraTokenClaims: async (_ctx, token) => ({
    org: 'acme', kind: 'person', email: token.accountId, groups: ['staff'],
  }),
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: async (_ctx, resource) => ({
        scope: 'agentprocess',
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
provider.on('server_error', (_ctx, error) => console.error('server_error', error));
handler = provider.callback();
console.log(`issuer ${issuer}`);
