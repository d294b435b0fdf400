// triton-fleet gateway: JWT verification for NGINX OSS + njs 0.7.9 (Debian 12).
//
// Runs as `js_content jwt.authorize` in a loopback server that stage 1's `auth_request`
// reaches through a proxy_cache of verdicts: async is allowed there, unlike `js_set` (which
// "supports only synchronous operations", nginx.org ngx_http_js_module docs; see
// docs/gateway.md), and the ~0.3 ms of RSA key import + verify is paid once per token and
// cache lifetime instead of on every request. `js_set $ngw_token_digest jwt.tokenDigest` (sync)
// gives that cache a short key: the sha256 of the Authorization header instead of the header.
// Two preloaded objects (js_preload_object, rendered by the role):
//   jwt_keys   { "<kid>": { "alg": "RS256", "spki": "<PEM SubjectPublicKeyInfo>" }
//              | { "alg": "HS256", "secret": "<shared secret>" } }
//   jwt_policy { algorithms, issuer, audience, leeway, max_lifetime, max_token_bytes,
//                scope_claim, scope_value, scopes_claim, models_claim, served_models,
//                class_claim, classes, default_class, cache_ttl }
// Request (from stage 1's /_authz*): Authorization, X-Ngw-Model (the model of a /v2 route,
// empty on gRPC) and X-Ngw-Route: "openai" for /v1, where the model is in the body and the
// models claim is enforced by the OpenAI-compatible service, not here.
// Result (headers of the 2xx/401/403 answer, read with auth_request_set):
//   X-Auth-Sub, X-Auth-Class, X-Auth-Models (the verified models claim as a JSON array,
//   ["*"] when it allows all or no models claim is configured, [] when the configured claim is
//   absent), X-Auth-Scope (the verified scopes_claim, space separated; absent when the token
//   has none) (+ X-Accel-Expires, the cache lifetime) on success;
//   X-Auth-Error (a short, fixed reason code for the log and the JSON body) on 401 / 403. nginx maps the reason to WWW-Authenticate.
// A key is bound to ONE algorithm: the token's `alg` must be in the allow-list AND equal
// the key's `alg`, so an RSA public key can never be used as an HMAC secret, and `none`
// never verifies. `kid` is only a lookup into our own map (never jku/x5u).

var ncrypto = require('crypto');

var ALGS = {
    RS256: { kind: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    RS384: { kind: 'RSASSA-PKCS1-v1_5', hash: 'SHA-384' },
    RS512: { kind: 'RSASSA-PKCS1-v1_5', hash: 'SHA-512' },
    PS256: { kind: 'RSA-PSS', hash: 'SHA-256', salt: 32 },
    PS384: { kind: 'RSA-PSS', hash: 'SHA-384', salt: 48 },
    PS512: { kind: 'RSA-PSS', hash: 'SHA-512', salt: 64 },
    ES256: { kind: 'ECDSA', hash: 'SHA-256', curve: 'P-256', siglen: 64 },
    ES384: { kind: 'ECDSA', hash: 'SHA-384', curve: 'P-384', siglen: 96 },
    HS256: { kind: 'HMAC', hmac: 'sha256' },
    HS384: { kind: 'HMAC', hmac: 'sha384' },
    HS512: { kind: 'HMAC', hmac: 'sha512' }
};

var B64URL = /^[A-Za-z0-9_-]+$/;
// Model names forwarded in X-Auth-Models: plain ASCII only (a header value), others dropped.
var MODEL_OK = /^[A-Za-z0-9][A-Za-z0-9._:\/-]{0,127}$/;
var SUB_OK = /^[\x21-\x7e]{1,256}$/;
// An OAuth scope-token (RFC 6749 section 3.3: printable ASCII but space, '"' and '\'); others
// are dropped, so X-Auth-Scope is always a plain space separated header value.
var SCOPE_OK = /^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/;
// One byte: never a SubjectPublicKeyInfo, so importing it fails inside OpenSSL (d2i_PUBKEY).
var NOT_A_KEY = Buffer.from([0]);

// Preloaded (js_preload_object) arrays are frozen and lack Array.prototype methods in
// njs 0.7.9: walk them by index.
function contains(list, x) {
    for (var i = 0; i < list.length; i++) {
        if (list[i] === x) {
            return true;
        }
    }
    return false;
}

function Reject(status, reason) {
    this.status = status;
    this.reason = reason;
}

function b64json(part, what) {
    var v;
    try {
        v = JSON.parse(Buffer.from(part, 'base64url').toString());
    } catch (e) {
        throw new Reject(401, 'malformed_' + what);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
        throw new Reject(401, 'malformed_' + what);
    }
    return v;
}

function spkiDer(pem) {
    return Buffer.from(pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64');
}

// Constant-time comparison: njs has no timingSafeEqual, so compare HMACs of both values
// under a random per-call key (an attacker cannot steer the compared bytes).
function safeEqual(a, b) {
    var k = crypto.getRandomValues(new Uint8Array(32));
    var ha = ncrypto.createHmac('sha256', Buffer.from(k)).update(a).digest('hex');
    var hb = ncrypto.createHmac('sha256', Buffer.from(k)).update(b).digest('hex');
    return ha === hb && a.length === b.length;
}

// A WebCrypto verify that answers false leaves OpenSSL's reasons (e.g. "rsa routines::padding
// check failed") in the worker's error queue: njs 0.7.9 drains that queue only in
// njs_webcrypto_error(), which runs when an operation fails (external/njs_webcrypto_module.c,
// tag 0.7.9), not when EVP_PKEY_verify() returns 0. The next TLS call of the worker then finds
// them and logs "[alert] ignoring stale global SSL error" for each (ngx_ssl_clear_error() in
// src/event/ngx_event_openssl.c, nginx 1.22.1): anyone could fill the error log. A key
// import that fails on purpose goes through njs_webcrypto_error(), which reads and removes
// every queued entry (~13 us); its own error message is not wanted.
async function drainOpenSSLErrors() {
    try {
        await crypto.subtle.importKey('spki', NOT_A_KEY, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify']);
    } catch (e) {
        // the failure is the point
    }
}

async function checkSignature(alg, key, signingInput, sig) {
    var spec = ALGS[alg];
    if (spec.kind === 'HMAC') {
        if (typeof key.secret !== 'string' || key.secret.length === 0) {
            return false;
        }
        var mac = ncrypto.createHmac(spec.hmac, key.secret).update(signingInput).digest();
        return safeEqual(mac, sig);
    }
    if (typeof key.spki !== 'string') {
        return false;
    }
    if (spec.siglen && sig.length !== spec.siglen) {
        return false;
    }
    var importAlg = { name: spec.kind, hash: spec.hash };
    var verifyAlg = { name: spec.kind };
    if (spec.kind === 'ECDSA') {
        importAlg = { name: 'ECDSA', namedCurve: spec.curve };
        verifyAlg = { name: 'ECDSA', hash: spec.hash };
    } else if (spec.kind === 'RSA-PSS') {
        verifyAlg = { name: 'RSA-PSS', saltLength: spec.salt };
    }
    try {
        var ck = await crypto.subtle.importKey('spki', spkiDer(key.spki), importAlg, false, ['verify']);
        return (await crypto.subtle.verify(verifyAlg, ck, sig, signingInput)) === true;
    } finally {
        // Also after a success: the queue must be empty whatever OpenSSL did on the way.
        await drainOpenSSLErrors();
    }
}

function audienceOk(aud, want) {
    if (typeof aud === 'string') {
        return aud === want;
    }
    if (Array.isArray(aud)) {
        return aud.indexOf(want) !== -1;
    }
    return false;
}

// A claim holding a list: JSON array, or a space separated string (OAuth `scope`).
function claimList(v) {
    if (Array.isArray(v)) {
        return v.filter(function (x) { return typeof x === 'string'; });
    }
    if (typeof v === 'string') {
        return v.split(' ').filter(function (x) { return x.length > 0; });
    }
    return null;
}

function pickKey(header) {
    if (header.kid !== undefined) {
        if (typeof header.kid !== 'string' || !Object.prototype.hasOwnProperty.call(jwt_keys, header.kid)) {
            throw new Reject(401, 'unknown_kid');
        }
        return jwt_keys[header.kid];
    }
    // No kid: accepted only when exactly one key is configured.
    var kids = Object.keys(jwt_keys);
    if (kids.length !== 1) {
        throw new Reject(401, 'missing_kid');
    }
    return jwt_keys[kids[0]];
}

async function verifyToken(r) {
    var policy = jwt_policy;
    var auth = r.headersIn.Authorization;
    if (!auth) {
        throw new Reject(401, 'missing_token');
    }
    var m = /^Bearer +([^ ]+) *$/i.exec(auth);
    if (!m) {
        throw new Reject(401, 'missing_token');
    }
    // The header buffers leave room above this size (nginx_gateway_jwt_max_token_bytes); this
    // is the limit a client sees, as a 401 with its own reason.
    if (m[1].length > policy.max_token_bytes) {
        throw new Reject(401, 'token_too_large');
    }
    var parts = m[1].split('.');
    if (parts.length !== 3 || !B64URL.test(parts[0]) || !B64URL.test(parts[1])) {
        throw new Reject(401, 'malformed_token');
    }
    var header = b64json(parts[0], 'header');
    if (typeof header.alg !== 'string' || !ALGS[header.alg] || !contains(policy.algorithms, header.alg)) {
        throw new Reject(401, 'alg_not_allowed');
    }
    if (header.crit !== undefined) {
        throw new Reject(401, 'crit_unsupported');
    }
    if (!B64URL.test(parts[2])) {
        throw new Reject(401, 'bad_signature');
    }
    var key = pickKey(header);
    if (key.alg !== header.alg) {
        throw new Reject(401, 'alg_key_mismatch');
    }
    var ok;
    try {
        ok = await checkSignature(header.alg, key, parts[0] + '.' + parts[1], Buffer.from(parts[2], 'base64url'));
    } catch (e) {
        ok = false;
    }
    if (!ok) {
        throw new Reject(401, 'bad_signature');
    }

    var c = b64json(parts[1], 'payload');
    var now = Math.floor(Date.now() / 1000);
    var leeway = policy.leeway;
    if (typeof c.exp !== 'number') {
        throw new Reject(401, 'missing_exp');
    }
    if (now >= c.exp + leeway) {
        throw new Reject(401, 'expired');
    }
    if (c.nbf !== undefined && (typeof c.nbf !== 'number' || now + leeway < c.nbf)) {
        throw new Reject(401, 'not_yet_valid');
    }
    if (c.iat !== undefined && (typeof c.iat !== 'number' || c.iat > now + leeway)) {
        throw new Reject(401, 'iat_in_future');
    }
    // A stolen long-lived token stays usable until its exp: bound what the issuer may grant.
    // Without iat the lifetime left is what can be checked (the leeway allows for the issuer's
    // clock being ahead).
    if (policy.max_lifetime > 0) {
        var lifetime = typeof c.iat === 'number' ? c.exp - c.iat : c.exp - now - leeway;
        if (lifetime > policy.max_lifetime) {
            throw new Reject(401, 'lifetime_too_long');
        }
    }
    if (c.iss !== policy.issuer) {
        throw new Reject(401, 'bad_iss');
    }
    if (!audienceOk(c.aud, policy.audience)) {
        throw new Reject(401, 'bad_aud');
    }
    if (typeof c.sub !== 'string' || !SUB_OK.test(c.sub)) {
        throw new Reject(401, 'bad_sub');
    }

    // Authorization (403): a valid identity without the needed claim.
    if (policy.scope_claim) {
        var scopes = claimList(c[policy.scope_claim]);
        if (scopes === null || scopes.indexOf(policy.scope_value) === -1) {
            throw new Reject(403, 'missing_scope');
        }
    }
    // The models the token may use, as forwarded to the OpenAI-compatible service.
    var granted = ['*'];
    if (policy.models_claim) {
        var listed = claimList(c[policy.models_claim]);
        granted = [];
        if (listed !== null && contains(listed, '*')) {
            granted = ['*'];
        } else if (listed !== null) {
            granted = listed.filter(function (x) { return MODEL_OK.test(x); });
        }
    }
    if (policy.models_claim && r.headersIn['X-Ngw-Route'] !== 'openai') {
        var models = claimList(c[policy.models_claim]);
        var want = r.variables.ngw_model;
        var allowed = models !== null && contains(models, '*');
        if (models !== null && !allowed) {
            allowed = true;
            var need = want ? [want] : policy.served_models;
            for (var i = 0; i < need.length; i++) {
                allowed = allowed && contains(models, need[i]);
            }
        }
        if (!allowed) {
            throw new Reject(403, 'model_not_allowed');
        }
    }
    var cls = policy.default_class;
    if (policy.class_claim && typeof c[policy.class_claim] === 'string' &&
            contains(policy.classes, c[policy.class_claim])) {
        cls = c[policy.class_claim];
    }
    // The scopes forwarded in X-Auth-Scope (the OpenAI-compatible service's server tools check
    // them): only from the verified payload, only plain scope-tokens.
    var scope = '';
    if (policy.scopes_claim) {
        var forwarded = claimList(c[policy.scopes_claim]);
        if (forwarded !== null) {
            scope = forwarded.filter(function (x) { return SCOPE_OK.test(x); }).join(' ');
        }
    }
    return { sub: c.sub, cls: cls, models: granted, scope: scope, ttl: Math.min(policy.cache_ttl, c.exp - now) };
}

async function authorize(r) {
    var res;
    try {
        res = await verifyToken(r);
    } catch (e) {
        if (!(e instanceof Reject)) {
            r.error('jwt: internal error: ' + e);
            e = new Reject(401, 'internal_error');
        }
        r.headersOut['X-Auth-Error'] = e.reason;
        r.return(e.status);
        return;
    }
    r.headersOut['X-Auth-Sub'] = res.sub;
    r.headersOut['X-Auth-Class'] = res.cls;
    r.headersOut['X-Auth-Models'] = JSON.stringify(res.models);
    if (res.scope) {
        r.headersOut['X-Auth-Scope'] = res.scope;
    }
    // Only this answer may be cached by stage 1 (nothing else sets a lifetime), and never past
    // the token's exp: the verdict depends on nothing but the token, the model (or the /v1
    // route), the keys and the policy, and the cache key holds all of them.
    if (res.ttl > 0) {
        r.headersOut['X-Accel-Expires'] = String(res.ttl);
    }
    r.return(204);
}

// js_set handler (synchronous, as js_set requires): the verdict cache key part that stands for
// the token. nginx stores a cache key in full in front of each cached answer and skips the cache
// when the key does not fit in proxy_buffer_size ("is not enough for cache key"), which a
// whole IdP token with group claims does not; a sha256 always fits, and the cached files then
// hold no token. njs hashes with its own sha2 code (external/njs_crypto_module.c), not
// OpenSSL. No header = "" (stage 1 then neither reads nor stores a verdict).
function tokenDigest(r) {
    var auth = r.headersIn.Authorization;
    if (!auth) {
        return '';
    }
    return ncrypto.createHash('sha256').update(auth).digest('hex');
}

export default { authorize, tokenDigest };
