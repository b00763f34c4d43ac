//! Against a real authorization server: the npm `oidc-provider` (a certified OpenID provider),
//! started from tests/support/provider.mjs, issuing client-credentials tokens with scopes and a
//! resource indicator. Needs STEADFAST_TEST_OIDC (`scripts/oidc-provider.sh --install`).

use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rand::Rng as _;
use serde_json::Value;
use steadfast_oauth::{
    ClientCredentials, ClientCredentialsConfig, HttpJwksFetcher, Introspector, Jwks, JwksOptions,
    JwtConfig, JwtValidator, Secret, TokenError,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const RESOURCE: &str = "https://mcp.test/mcp";
const IGNORE: &str = "needs STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)";

struct Provider {
    issuer: String,
    secret: Secret,
    http: reqwest::Client,
    _child: Child,
}

impl Provider {
    async fn start() -> Self {
        // With the `rustls` feature reqwest needs a process-wide provider before any client.
        #[cfg(feature = "rustls")]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let Ok(dir) = std::env::var("STEADFAST_TEST_OIDC") else {
            panic!("{IGNORE}")
        };
        let secret: String = (0..32)
            .map(|_| rand::thread_rng().sample(rand::distributions::Alphanumeric) as char)
            .collect();
        let mut child = Command::new("node")
            .arg(format!("{dir}/provider.mjs"))
            .env("OIDC_CLIENT_SECRET", &secret)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(issuer) = line.strip_prefix("READY ") {
                    return issuer.to_string();
                }
            }
            panic!("provider.mjs exited before READY")
        });
        let issuer = ready.await.expect("provider ready within 30 s");
        // Keep draining stdout: a closed pipe would kill node at its next log line.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            issuer,
            secret: Secret::new(secret),
            http: reqwest::Client::new(),
            _child: child,
        }
    }

    fn source(&self, scope: &str, resource: &str) -> ClientCredentials {
        ClientCredentials::new(ClientCredentialsConfig {
            token_endpoint: format!("{}/token", self.issuer),
            client_id: "gateway".into(),
            client_secret: self.secret.clone(),
            scope: Some(scope.into()),
            resource: Some(resource.into()),
            timeout: Duration::from_secs(5),
        })
        .unwrap()
    }

    async fn token(&self, scope: &str, resource: &str) -> String {
        self.source(scope, resource)
            .access_token()
            .await
            .unwrap()
            .expose()
            .to_owned()
    }

    async fn admin(&self, what: &str) -> Value {
        let resp = self
            .http
            .post(format!("{}/admin/{what}", self.issuer))
            .send()
            .await
            .unwrap();
        serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap()
    }

    async fn validator(&self, issuer: &str, options: JwksOptions) -> (JwtValidator, Jwks) {
        let fetcher = HttpJwksFetcher::discover(&self.issuer, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(fetcher.uri(), format!("{}/jwks", self.issuer));
        let jwks = Jwks::with_options(fetcher, options);
        (
            JwtValidator::new(JwtConfig::new(issuer, RESOURCE), jwks.clone()),
            jwks,
        )
    }
}

fn fast() -> JwksOptions {
    JwksOptions {
        min_refresh_interval: Duration::ZERO,
        fetch_timeout: Duration::from_secs(1),
        max_age: Duration::from_secs(600),
    }
}

fn header_of(token: &str) -> Value {
    serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap()
}

fn reheader(token: &str, header: &Value) -> String {
    let rest: Vec<&str> = token.splitn(2, '.').collect();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).unwrap()),
        rest[1]
    )
}

#[tokio::test]
#[ignore = "needs STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)"]
async fn tokens_from_a_real_authorization_server_pass_and_fail_the_right_checks() {
    let p = Provider::start().await;
    let (v, _) = p.validator(&p.issuer, fast()).await;
    let token = p.token("tools:read tools:write", RESOURCE).await;
    assert_eq!(header_of(&token)["alg"], "RS256");
    let fetcher = HttpJwksFetcher::discover(&p.issuer, Duration::from_secs(2))
        .await
        .unwrap();
    let config = JwtConfig::new(&p.issuer, RESOURCE).require_access_token_typ(true);
    let strict = JwtValidator::new(config, Jwks::with_options(fetcher, fast()));
    strict
        .validate(&token)
        .await
        .expect("oidc-provider marks access tokens typ at+jwt");

    let claims = v.validate(&token).await.expect("a valid token is accepted");
    assert_eq!(claims.client_id.as_deref(), Some("gateway"));
    assert_eq!(claims.aud, [RESOURCE]);
    claims
        .require_scopes(&["tools:read", "tools:write"])
        .unwrap();

    // Missing scope: a token granted only tools:read.
    let reader = v
        .validate(&p.token("tools:read", RESOURCE).await)
        .await
        .unwrap();
    let err = reader.require_scopes(&["tools:write"]).unwrap_err();
    assert_eq!(err.client_error().status(), 403);

    // Expired: the validator's clock an hour on (the provider issues 300 s tokens).
    let later = v.clone().with_clock(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600
    });
    assert!(matches!(
        later.validate(&token).await,
        Err(TokenError::Expired { .. })
    ));

    // Wrong audience: a token for another resource from the same server.
    let other = p.token("tools:read", "https://other.test/mcp").await;
    assert_eq!(v.validate(&other).await, Err(TokenError::WrongAudience));

    // Wrong issuer: same keys, a validator expecting another issuer.
    let (elsewhere, _) = p.validator("https://as.elsewhere.test", fast()).await;
    assert_eq!(
        elsewhere.validate(&token).await,
        Err(TokenError::WrongIssuer)
    );

    // alg none, with and without a signature.
    let mut none = header_of(&token);
    none["alg"] = "none".into();
    let unsigned = reheader(&token, &none);
    assert_eq!(
        v.validate(&unsigned).await,
        Err(TokenError::AlgorithmNotAllowed("none".into()))
    );
    let (body, _) = unsigned.rsplit_once('.').unwrap();
    assert_eq!(
        v.validate(&format!("{body}.")).await,
        Err(TokenError::AlgorithmNotAllowed("none".into()))
    );

    // HS256 keyed with the server's published public key (the JWK JSON, and its modulus).
    let resp = p
        .http
        .get(format!("{}/jwks", p.issuer))
        .send()
        .await
        .unwrap();
    let jwks: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    let jwk = &jwks["keys"][0];
    let claims_json: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    for secret in [
        serde_json::to_vec(jwk).unwrap(),
        URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap(),
    ] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = jwk["kid"].as_str().map(str::to_owned);
        let forged =
            jsonwebtoken::encode(&header, &claims_json, &EncodingKey::from_secret(&secret))
                .unwrap();
        assert_eq!(
            v.validate(&forged).await,
            Err(TokenError::AlgorithmNotAllowed("HS256".into()))
        );
    }

    // A tampered payload under the real signature.
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let mut evil = claims_json.clone();
    evil["scope"] = "admin".into();
    parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&evil).unwrap());
    assert_eq!(
        v.validate(&parts.join(".")).await,
        Err(TokenError::BadSignature)
    );
}

#[tokio::test]
#[ignore = "needs STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)"]
async fn opaque_tokens_are_introspected() {
    let p = Provider::start().await;
    let opaque = p.token("tools:read", "https://opaque.test/mcp").await;
    assert_ne!(opaque.split('.').count(), 3, "an opaque token, not a JWT");
    let endpoint = format!("{}/token/introspection", p.issuer);
    let i = Introspector::new(
        &endpoint,
        "gateway",
        p.secret.clone(),
        "https://opaque.test/mcp",
        Duration::from_secs(5),
    )
    .unwrap()
    .issuer(&p.issuer);
    let claims = i.validate(&opaque).await.unwrap();
    assert!(claims.has_scope("tools:read"));
    assert_eq!(i.cached(), 1);
    assert_eq!(
        i.validate("not-a-token-it-issued").await,
        Err(TokenError::Inactive)
    );
    let foreign = Introspector::new(
        &endpoint,
        "gateway",
        p.secret.clone(),
        RESOURCE,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(
        foreign.validate(&opaque).await,
        Err(TokenError::WrongAudience)
    );
    let wrong_secret = Introspector::new(
        &endpoint,
        "gateway",
        Secret::new("nope"),
        RESOURCE,
        Duration::from_secs(5),
    )
    .unwrap();
    let err = wrong_secret.validate(&opaque).await.unwrap_err();
    assert!(
        matches!(err, TokenError::Unavailable(ref why) if why.contains("401")),
        "{err:?}"
    );
}

#[tokio::test]
#[ignore = "needs STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)"]
async fn a_rotated_key_is_picked_up_and_the_removed_one_refused() {
    let p = Provider::start().await;
    let (v, jwks) = p.validator(&p.issuer, fast()).await;
    let old = p.token("tools:read", RESOURCE).await;
    v.validate(&old).await.unwrap();

    let kids = p.admin("rotate").await;
    let new = p.token("tools:read", RESOURCE).await;
    assert_eq!(header_of(&new)["kid"], kids["kids"][0], "the new key signs");
    assert_ne!(header_of(&new)["kid"], header_of(&old)["kid"]);
    v.validate(&new)
        .await
        .expect("the new kid is fetched on first sight");
    v.validate(&old)
        .await
        .expect("the old key is still published");

    p.admin("drop-old").await;
    // The cache learns of the removal at its next refresh: here an unknown kid (or max_age).
    assert_eq!(jwks.cached_keys(), 2);
    let mut unknown = header_of(&new);
    unknown["kid"] = "not-published".into();
    let probe = v.validate(&reheader(&new, &unknown)).await;
    assert_eq!(
        probe,
        Err(TokenError::UnknownKey(Some("not-published".into())))
    );
    assert_eq!(jwks.cached_keys(), 1);
    assert!(matches!(
        v.validate(&old).await,
        Err(TokenError::UnknownKey(Some(_)))
    ));
    v.validate(&new).await.unwrap();
}

#[tokio::test]
#[ignore = "needs STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)"]
async fn a_hanging_jwks_endpoint_never_blocks_cached_keys_and_bounds_the_wait() {
    let p = Provider::start().await;
    let (v, _) = p.validator(&p.issuer, fast()).await;
    let cached = p.token("tools:read", RESOURCE).await;
    v.validate(&cached).await.unwrap();
    p.admin("rotate").await;
    p.admin("hang-jwks").await;
    let rotated = p.token("tools:read", RESOURCE).await;

    let started = tokio::time::Instant::now();
    let err = v.validate(&rotated).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, TokenError::Unavailable(_)), "{err:?}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );

    // While a refresh for the new kid hangs, the cached key verifies immediately.
    let stuck = tokio::spawn({
        let (v, t) = (v.clone(), rotated.clone());
        async move { v.validate(&t).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = tokio::time::Instant::now();
    v.validate(&cached).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(
        stuck.await.unwrap(),
        Err(TokenError::Unavailable(_))
    ));
}
