//! Keys generated at test time and tokens signed with them (no secrets in the repository).
#![allow(dead_code)]

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub const ISS: &str = "https://as.test";
pub const AUD: &str = "https://mcp.test/mcp";
pub const NOW: u64 = 1_800_000_000;

pub struct TestKey {
    pub kid: String,
    pub alg: Algorithm,
    pub encoding: EncodingKey,
    pub public_pem: Vec<u8>,
    pub jwk: Jwk,
}

impl TestKey {
    pub fn es256(kid: &str) -> Self {
        use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
        let sk = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
        let der = sk.to_pkcs8_der().unwrap();
        let public_pem = sk
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap()
            .into_bytes();
        Self::finish(
            kid,
            Algorithm::ES256,
            EncodingKey::from_ec_der(der.as_bytes()),
            public_pem,
        )
    }

    pub fn ed25519(kid: &str) -> Self {
        use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey, spki::der::pem::LineEnding};
        let sk = ed25519_dalek::SigningKey::generate(&mut rand::rngs::OsRng);
        let der = sk.to_pkcs8_der().unwrap();
        let public_pem = sk
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap()
            .into_bytes();
        let x = b64(sk.verifying_key().as_bytes());
        let jwk: Jwk =
            serde_json::from_value(json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid}))
                .unwrap();
        let encoding = EncodingKey::from_ed_der(der.as_bytes());
        Self {
            kid: kid.to_string(),
            alg: Algorithm::EdDSA,
            encoding,
            public_pem,
            jwk,
        }
    }

    fn finish(kid: &str, alg: Algorithm, encoding: EncodingKey, public_pem: Vec<u8>) -> Self {
        let mut jwk = Jwk::from_encoding_key(&encoding, alg).unwrap();
        jwk.common.key_id = Some(kid.to_string());
        Self {
            kid: kid.to_string(),
            alg,
            encoding,
            public_pem,
            jwk,
        }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

pub fn set(keys: &[&TestKey]) -> JwkSet {
    JwkSet {
        keys: keys.iter().map(|k| k.jwk.clone()).collect(),
    }
}

pub fn claims() -> Value {
    json!({"iss": ISS, "aud": AUD, "sub": "alice", "exp": NOW + 300, "iat": NOW, "scope": "tools:read tools:write"})
}

pub fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
