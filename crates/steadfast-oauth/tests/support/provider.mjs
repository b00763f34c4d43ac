// A real OpenID provider (oidc-provider) for crates/steadfast-oauth/tests/oidc_provider.rs and
// crates/steadfast-cli/tests/auth.rs (the gateway binary with [auth]).
//
// Issues client-credentials access tokens: JWTs (RS256) for any https resource indicator, opaque
// tokens for resources under https://opaque.test/ (for introspection). Keys are generated at
// start; nothing secret is stored. The client secret comes from OIDC_CLIENT_SECRET.
//
// Test controls (plain HTTP, same port):
//   POST /admin/rotate     add a new signing key (published first, so it signs from now on)
//   POST /admin/drop-old   publish only the newest key
//   POST /admin/hang-jwks  GET /jwks never answers from now on
//   POST /admin/ttl?seconds=N  access tokens issued from now on live N seconds (negative: born
//                          expired, for a gateway's expiry check without waiting)
//   POST /admin/sign       body {"header": {...}, "claims": {...}}: a JWT with exactly these
//                          claims, signed with the current key (token shapes of other IdPs:
//                          Keycloak, Entra, Auth0, Okta), answered as {"token": "..."}
// Two clients with the same secret: `gateway` and `other` (two subjects, `sub` = client id).
// Prints "READY <issuer>" on stdout once listening.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { generateKeyPair, exportJWK, importJWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

const secret = process.env.OIDC_CLIENT_SECRET;
if (!secret) throw new Error('OIDC_CLIENT_SECRET is required');
const SCOPES = 'tools:read tools:write';

async function newKey() {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

let keys = [await newKey()];
let hangJwks = false;
let ttl = 300;
let provider;

function client(id) {
  return {
    client_id: id,
    client_secret: secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: SCOPES,
  };
}

async function sign(req) {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  const { header = {}, claims } = JSON.parse(raw);
  const key = keys[0];
  const jwt = new SignJWT(claims).setProtectedHeader({ typ: 'at+jwt', ...header, alg: 'RS256', kid: key.kid });
  return jwt.sign(await importJWK(key, 'RS256'));
}

function build(issuer) {
  const p = new Provider(issuer, {
    clients: [client('gateway'), client('other')],
    jwks: { keys },
    scopes: SCOPES.split(' '),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: SCOPES,
          audience: resource,
          accessTokenTTL: ttl,
          accessTokenFormat: resource.startsWith('https://opaque.test/') ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  });
  p.proxy = false;
  return p;
}

const server = http.createServer(async (req, res) => {
  if (req.method === 'POST' && req.url === '/admin/sign') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ token: await sign(req) }));
    return;
  }
  if (req.method === 'POST' && req.url.startsWith('/admin/')) {
    if (req.url === '/admin/rotate') keys = [await newKey(), ...keys];
    else if (req.url === '/admin/drop-old') keys = keys.slice(0, 1);
    else if (req.url === '/admin/hang-jwks') hangJwks = true;
    else if (req.url.startsWith('/admin/ttl?seconds=')) ttl = Number(req.url.split('=')[1]);
    provider = build(provider.issuer);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ kids: keys.map((k) => k.kid) }));
    return;
  }
  if (hangJwks && req.url.startsWith('/jwks')) return; // never answer
  provider.callback()(req, res);
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = build(issuer);
  console.log(`READY ${issuer}`);
});
