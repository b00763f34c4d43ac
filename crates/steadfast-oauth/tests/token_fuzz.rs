//! The token parser and validator never panic, whatever arrives in the Authorization header.

mod common;

use common::*;
use proptest::prelude::*;
use steadfast_oauth::{JwtConfig, JwtValidator, KeySet};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

// One key and validator for all cases: key generation in a debug build dominates otherwise.
fn validator() -> &'static JwtValidator {
    static V: std::sync::OnceLock<JwtValidator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        JwtValidator::new(
            JwtConfig::new(ISS, AUD),
            KeySet::new(&set(&[&TestKey::es256("k")])),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_strings_never_panic(token in ".{0,300}") {
        let v = validator();
        prop_assert!(runtime().block_on(v.validate(&token)).is_err());
    }

    #[test]
    fn arbitrary_json_in_well_formed_parts_never_panics(
        header in prop::collection::vec(any::<u8>(), 0..80),
        alg in prop::sample::select(vec!["ES256", "RS256", "EdDSA", "none", "HS256", ""]),
        body in prop::collection::vec(any::<u8>(), 0..200),
        sig in prop::collection::vec(any::<u8>(), 0..80),
        structured in any::<bool>(),
    ) {
        let v = validator();
        let header = if structured { format!(r#"{{"alg":"{alg}","kid":"k"}}"#).into_bytes() } else { header };
        let token = format!("{}.{}.{}", b64(&header), b64(&body), b64(&sig));
        prop_assert!(runtime().block_on(v.validate(&token)).is_err());
    }
}
