//! JwtValidator against keys generated at test time: every check, and the algorithm attacks.

mod common;

use std::time::Duration;

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use steadfast_oauth::{ClientError, JwtConfig, JwtValidator, KeySet, SigningAlg, TokenError};

fn validator(keys: &[&TestKey]) -> JwtValidator {
    JwtValidator::new(JwtConfig::new(ISS, AUD), KeySet::new(&set(keys))).with_clock(|| NOW)
}

#[tokio::test]
async fn valid_es256_and_eddsa_tokens_are_accepted_with_their_claims() {
    let (ec, ed) = (TestKey::es256("ec1"), TestKey::ed25519("ed1"));
    let v = validator(&[&ec, &ed]);
    for key in [&ec, &ed] {
        let claims = v.validate(&key.sign(&claims())).await.unwrap();
        assert_eq!(claims.sub.as_deref(), Some("alice"));
        assert!(claims.has_scope("tools:write"));
        assert_eq!(claims.aud, [AUD]);
    }
}

#[tokio::test]
async fn each_failed_check_is_named() {
    let key = TestKey::es256("k");
    let v = validator(&[&key]);
    let check = |c| v.validate_owned(key.sign(&c));
    assert_eq!(
        check(with(claims(), "exp", json!(NOW - 61))).await,
        Err(TokenError::Expired {
            exp: NOW - 61,
            now: NOW
        })
    );
    // Inside the 60 s leeway.
    assert!(check(with(claims(), "exp", json!(NOW - 59))).await.is_ok());
    assert_eq!(
        check(with(claims(), "nbf", json!(NOW + 61))).await,
        Err(TokenError::NotYetValid {
            nbf: NOW + 61,
            now: NOW
        })
    );
    assert!(check(with(claims(), "nbf", json!(NOW + 59))).await.is_ok());
    assert_eq!(
        check(with(claims(), "aud", json!("https://other.test/mcp"))).await,
        Err(TokenError::WrongAudience)
    );
    assert!(
        check(with(claims(), "aud", json!(["x", AUD])))
            .await
            .is_ok()
    );
    assert_eq!(
        check(with(claims(), "iss", json!("https://evil.test"))).await,
        Err(TokenError::WrongIssuer)
    );
    let mut no_exp = claims();
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_eq!(check(no_exp).await, Err(TokenError::MissingClaim("exp")));
    assert!(matches!(
        check(with(claims(), "exp", json!("soon"))).await,
        Err(TokenError::Malformed(_))
    ));
}

trait ValidateOwned {
    fn validate_owned(
        &self,
        token: String,
    ) -> impl std::future::Future<Output = Result<steadfast_oauth::Claims, TokenError>>;
}

impl ValidateOwned for JwtValidator {
    async fn validate_owned(&self, token: String) -> Result<steadfast_oauth::Claims, TokenError> {
        self.validate(&token).await
    }
}

#[tokio::test]
async fn leeway_is_configurable() {
    let key = TestKey::es256("k");
    let v = JwtValidator::new(
        JwtConfig::new(ISS, AUD).leeway(Duration::ZERO),
        KeySet::new(&set(&[&key])),
    )
    .with_clock(|| NOW);
    let token = key.sign(&with(claims(), "exp", json!(NOW)));
    assert!(matches!(
        v.validate(&token).await,
        Err(TokenError::Expired { .. })
    ));
}

#[tokio::test]
async fn alg_none_is_refused() {
    let key = TestKey::es256("k");
    let v = validator(&[&key]);
    let header = b64(br#"{"alg":"none","kid":"k"}"#);
    let body = b64(serde_json::to_vec(&claims()).unwrap().as_slice());
    for token in [format!("{header}.{body}."), format!("{header}.{body}.AAAA")] {
        assert_eq!(
            v.validate(&token).await,
            Err(TokenError::AlgorithmNotAllowed("none".into()))
        );
    }
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_refused() {
    let key = TestKey::es256("k");
    let v = validator(&[&key]);
    // The classic confusion: the attacker HMACs with the bytes of the published public key.
    for secret in [
        key.public_pem.clone(),
        serde_json::to_vec(&key.jwk).unwrap(),
    ] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k".into());
        let token =
            jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(&secret)).unwrap();
        assert_eq!(
            v.validate(&token).await,
            Err(TokenError::AlgorithmNotAllowed("HS256".into()))
        );
    }
}

#[tokio::test]
async fn a_key_is_used_only_with_its_own_algorithm_family() {
    let (ec, ed) = (TestKey::es256("ec"), TestKey::ed25519("ed"));
    let v = validator(&[&ec]);
    // An Ed25519 token claiming the EC key's kid.
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("ec".into());
    let token = jsonwebtoken::encode(&header, &claims(), &ed.encoding).unwrap();
    assert!(matches!(
        v.validate(&token).await,
        Err(TokenError::UnknownKey(_) | TokenError::AlgorithmNotAllowed(_))
    ));
    // And with EdDSA off the allow list, it is refused by name.
    let strict = JwtValidator::new(
        JwtConfig::new(ISS, AUD).algorithms([SigningAlg::Es256]),
        KeySet::new(&set(&[&ec, &ed])),
    )
    .with_clock(|| NOW);
    assert_eq!(
        strict.validate(&ed.sign(&claims())).await,
        Err(TokenError::AlgorithmNotAllowed("EdDSA".into()))
    );
}

#[tokio::test]
async fn a_bad_signature_and_an_unknown_kid_are_told_apart() {
    let (signer, other) = (TestKey::es256("k"), TestKey::es256("k"));
    let v = validator(&[&other]);
    assert_eq!(
        v.validate(&signer.sign(&claims())).await,
        Err(TokenError::BadSignature)
    );
    let stranger = TestKey::es256("stranger");
    assert_eq!(
        v.validate(&stranger.sign(&claims())).await,
        Err(TokenError::UnknownKey(Some("stranger".into())))
    );
    // A tampered payload under a real signature.
    let token = other.sign(&claims());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = b64(serde_json::to_vec(&with(claims(), "sub", json!("mallory")))
        .unwrap()
        .as_slice());
    assert_eq!(
        v.validate(&parts.join(".")).await,
        Err(TokenError::BadSignature)
    );
}

#[tokio::test]
async fn malformed_tokens_are_named_and_the_client_only_hears_invalid_token() {
    let key = TestKey::es256("k");
    let v = validator(&[&key]);
    for token in [
        "",
        "a.b",
        "a.b.c.d",
        "!!!.e30.x",
        &format!("{}.e30.x", b64(b"[1]")),
    ] {
        let err = v.validate(token).await.unwrap_err();
        assert!(
            matches!(err, TokenError::Malformed(_)),
            "{token:?} gave {err:?}"
        );
        assert_eq!(err.client_error(), ClientError::InvalidToken);
        assert!(!err.to_string().contains(token) || token.len() < 4);
    }
}

#[tokio::test]
async fn required_scopes_give_insufficient_scope_with_the_scope() {
    let key = TestKey::es256("k");
    let claims = validator(&[&key])
        .validate(&key.sign(&claims()))
        .await
        .unwrap();
    assert!(claims.require_scopes(&["tools:read"]).is_ok());
    let err = claims.require_scopes(&["tools:read", "admin"]).unwrap_err();
    assert_eq!(
        err.client_error(),
        ClientError::InsufficientScope {
            scope: "tools:read admin".into()
        }
    );
    assert_eq!(err.client_error().status(), 403);
    assert_eq!(err.client_error().code(), Some("insufficient_scope"));
}

#[tokio::test]
async fn typ_at_jwt_can_be_required() {
    let key = TestKey::es256("k");
    let config = JwtConfig::new(ISS, AUD).require_access_token_typ(true);
    let v = JwtValidator::new(config, KeySet::new(&set(&[&key]))).with_clock(|| NOW);
    // TestKey::sign sets typ "JWT", as many issuers do.
    assert!(matches!(
        v.validate(&key.sign(&claims())).await,
        Err(TokenError::Malformed(_))
    ));
    let mut header = Header::new(Algorithm::ES256);
    (header.kid, header.typ) = (Some("k".into()), Some("at+jwt".into()));
    let token = jsonwebtoken::encode(&header, &claims(), &key.encoding).unwrap();
    v.validate(&token).await.unwrap();
}
