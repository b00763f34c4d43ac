//! Tokens shaped as real identity providers issue them (Keycloak, Entra ID, Auth0, Okta), signed
//! with keys generated here: each is accepted with the claims a gateway needs, and the checks
//! that must still refuse (an `iat` in the future) do.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use steadfast_oauth::{
    AccessPolicy, Claims, IntrospectFn, Introspector, JwtConfig, JwtValidator, KeySet, TokenError,
};

fn validator(key: &TestKey, config: JwtConfig) -> JwtValidator {
    JwtValidator::new(config, KeySet::new(&set(&[key]))).with_clock(|| NOW)
}

/// Keycloak 26, client credentials of the confidential client `mcp-gw` with a realm role and a
/// client role: `scope` is a string, roles are nested, `sub` is the service account's id.
fn keycloak() -> Value {
    json!({
        "exp": NOW + 300, "iat": NOW, "jti": "onrtcc:8a0c", "iss": ISS, "aud": [AUD, "account"],
        "sub": "5b1e0c9d-6d53-4d0e-9c53-2a7d8a3f4b11", "typ": "Bearer", "azp": "mcp-gw",
        "acr": "1", "allowed-origins": ["/*"],
        "realm_access": {"roles": ["default-roles-demo", "offline_access", "mcp-admin"]},
        "resource_access": {"mcp.gateway": {"roles": ["reader"]}, "account": {"roles": ["manage-account"]}},
        "scope": "profile email", "clientHost": "10.0.0.7", "email_verified": false,
        "preferred_username": "service-account-mcp-gw", "clientAddress": "10.0.0.7", "client_id": "mcp-gw"
    })
}

/// Entra ID v2, an app-only token: `aud` the API's application ID URI (not a URL), `roles`,
/// and `scp` beside `scope` where a delegated flow added both.
fn entra() -> Value {
    json!({
        "aud": "api://7d2c9f10-3c1e-4b7e-a1c4-52f4b8e0d1aa", "iss": ISS,
        "iat": NOW, "nbf": NOW, "exp": NOW + 3599, "aio": "k2BgYGg…", "azp": "0c5f…", "azpacr": "1",
        "oid": "a1b2c3d4-0000-4000-8000-000000000001", "rh": "0.AX…", "roles": ["Tools.Read"],
        "sub": "a1b2c3d4-0000-4000-8000-000000000001", "tid": "72f988bf-86f1-41af-91ab-2d7cd011db47",
        "uti": "Xy7…", "ver": "2.0", "scp": "tools.read tools.write", "scope": "tools:read"
    })
}

/// Auth0, client credentials: `sub` is `<client>@clients`, `gty`, fractional-free but with
/// `permissions` beside `scope`; Okta: `scp` a list, `cid`, and fractional times as some
/// libraries write them.
fn auth0() -> Value {
    json!({
        "iss": ISS, "sub": "Yl3kQ0m9@clients", "aud": AUD, "iat": NOW, "exp": NOW + 86400,
        "scope": "tools:read", "gty": "client-credentials", "azp": "Yl3kQ0m9",
        "permissions": ["tools:read"]
    })
}

fn okta() -> Value {
    json!({
        "ver": 1, "jti": "AT.x1", "iss": ISS, "aud": AUD, "iat": NOW as f64 + 0.25,
        "exp": NOW as f64 + 3600.75, "nbf": NOW as f64 - 0.5, "cid": "0oa1b2c3", "uid": "00u1",
        "scp": ["tools:read", "tools:write"], "sub": "dev@example.com"
    })
}

#[tokio::test]
async fn scope_and_scp_together_are_united_standard_first() {
    let key = TestKey::es256("k");
    let aud = "api://7d2c9f10-3c1e-4b7e-a1c4-52f4b8e0d1aa";
    let v = validator(&key, JwtConfig::new(ISS, AUD).also_audiences([aud]));
    let entra = v
        .validate(&key.sign(&entra()))
        .await
        .expect("Entra's shape");
    assert_eq!(entra.scope, ["tools:read", "tools.read", "tools.write"]);
    // Either claim alone, string or list, as before.
    let okta = v.validate(&key.sign(&okta())).await.expect("Okta's shape");
    assert_eq!(okta.scope, ["tools:read", "tools:write"]);
    // The same scope twice is kept once.
    let both = with(claims(), "scp", json!(["tools:read", "x"]));
    let c = v.validate(&key.sign(&both)).await.unwrap();
    assert_eq!(c.scope, ["tools:read", "tools:write", "x"]);
}

#[tokio::test]
async fn fractional_times_are_accepted_and_rounded_toward_a_shorter_life() {
    let key = TestKey::es256("k");
    let v = validator(&key, JwtConfig::new(ISS, AUD));
    let c = v
        .validate(&key.sign(&okta()))
        .await
        .expect("fractional exp/iat/nbf");
    assert_eq!(c.exp, Some(NOW + 3600), "exp rounded down");
    assert_eq!(c.iat, Some(NOW + 1), "iat rounded up");
    assert_eq!(c.nbf, Some(NOW), "nbf rounded up");
    // A fractional exp already past is still expired.
    let past = with(okta(), "exp", json!(NOW as f64 - 61.5));
    assert!(matches!(
        v.validate(&key.sign(&past)).await,
        Err(TokenError::Expired { .. })
    ));
    // A negative or non-number time is malformed, not silently read as absent.
    let negative = with(claims(), "exp", json!(-1.5));
    assert!(matches!(
        v.validate(&key.sign(&negative)).await,
        Err(TokenError::Malformed(_))
    ));
}

#[tokio::test]
async fn an_iat_beyond_the_leeway_in_the_future_is_refused() {
    let key = TestKey::es256("k");
    let v = validator(
        &key,
        JwtConfig::new(ISS, AUD).leeway(Duration::from_secs(60)),
    );
    let year = 365 * 24 * 3600;
    let future = with(
        with(claims(), "iat", json!(NOW + year)),
        "exp",
        json!(NOW + year + 300),
    );
    let e = v.validate(&key.sign(&future)).await.unwrap_err();
    assert_eq!(
        e,
        TokenError::IssuedInTheFuture {
            iat: NOW + year,
            now: NOW
        }
    );
    assert!(
        e.to_string().starts_with("issued in the future: iat"),
        "{e}"
    );
    // Within the leeway (clock skew), accepted.
    let skewed = with(claims(), "iat", json!(NOW + 60));
    assert!(v.validate(&key.sign(&skewed)).await.is_ok());
}

#[tokio::test]
async fn a_non_url_audience_is_accepted_only_when_configured() {
    let key = TestKey::es256("k");
    let guid = "7d2c9f10-3c1e-4b7e-a1c4-52f4b8e0d1aa";
    let entra_v1 = with(entra(), "aud", json!(guid));
    let plain = validator(&key, JwtConfig::new(ISS, AUD));
    assert_eq!(
        plain.validate(&key.sign(&entra_v1)).await,
        Err(TokenError::WrongAudience)
    );
    let configured = validator(&key, JwtConfig::new(ISS, AUD).also_audiences([guid]));
    assert!(configured.validate(&key.sign(&entra_v1)).await.is_ok());
    // The resource URI itself still passes.
    assert!(configured.validate(&key.sign(&claims())).await.is_ok());
}

#[tokio::test]
async fn access_rules_key_on_nested_claims() {
    let key = TestKey::es256("k");
    let v = validator(&key, JwtConfig::new(ISS, AUD));
    let kc = v
        .validate(&key.sign(&keycloak()))
        .await
        .expect("Keycloak's shape");
    let policy: AccessPolicy = toml::from_str(
        r#"
        ["claim:realm_access.roles=mcp-admin"]
        tools = ["admin_*"]
        ["claim:resource_access.mcp.gateway.roles=reader"]
        tools = ["read_*"]
        ["claim:resource_access.mcp.gateway.roles=writer"]
        tools = ["write_*"]
        ["claim:allowed-origins=/*"]
        prompts = ["p"]
        "#,
    )
    .unwrap();
    assert!(policy.allows_tool(&kc, "admin_reset"));
    assert!(
        policy.allows_tool(&kc, "read_file"),
        "a client id with a dot"
    );
    assert!(!policy.allows_tool(&kc, "write_file"));
    assert!(policy.allows_prompt(&kc, "p"), "a top-level key as it is");
    // Nothing nested where the path leads nowhere.
    let flat: Claims = serde_json::from_value(json!({"realm_access": "mcp-admin"})).unwrap();
    assert!(!policy.allows_tool(&flat, "admin_reset"));
}

#[tokio::test]
async fn the_subject_falls_back_to_the_client_and_is_none_without_one() {
    let key = TestKey::es256("k");
    let v = validator(&key, JwtConfig::new(ISS, AUD));
    let a0 = v.validate(&key.sign(&auth0())).await.unwrap();
    assert_eq!(a0.subject(), Some("Yl3kQ0m9@clients"));
    let mut no_sub = keycloak();
    no_sub.as_object_mut().unwrap().remove("sub");
    let kc = v.validate(&key.sign(&no_sub)).await.unwrap();
    assert_eq!(kc.subject(), Some("mcp-gw"), "client_id");
    no_sub.as_object_mut().unwrap().remove("client_id");
    let kc = v.validate(&key.sign(&no_sub)).await.unwrap();
    assert_eq!(kc.subject(), Some("mcp-gw"), "azp");
    no_sub.as_object_mut().unwrap().remove("azp");
    let kc = v.validate(&key.sign(&no_sub)).await.unwrap();
    assert_eq!(kc.subject(), None);
}

fn introspector(answer: Value, require_iss: bool) -> Introspector {
    let fetch: IntrospectFn = Arc::new(move |_token: String| {
        let answer = answer.clone();
        Box::pin(async move { Ok(answer) })
    });
    Introspector::with_fetcher(fetch, AUD)
        .issuer(ISS)
        .require_issuer(require_iss)
        .with_clock(|| NOW)
}

#[tokio::test]
async fn an_introspection_answer_without_iss_is_accepted_unless_required() {
    let answer =
        json!({"active": true, "aud": AUD, "sub": "alice", "exp": NOW + 60, "scope": "tools:read"});
    let c = introspector(answer.clone(), false)
        .validate("opaque")
        .await
        .expect("RFC 7662 makes iss optional");
    assert_eq!(c.sub.as_deref(), Some("alice"));
    assert_eq!(
        introspector(answer.clone(), true).validate("opaque").await,
        Err(TokenError::MissingClaim("iss"))
    );
    // A wrong iss is refused either way.
    let wrong = with(answer, "iss", json!("https://elsewhere.test"));
    assert_eq!(
        introspector(wrong, false).validate("opaque").await,
        Err(TokenError::WrongIssuer)
    );
}
