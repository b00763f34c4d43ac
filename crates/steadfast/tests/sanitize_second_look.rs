//! A span that one rule turns down stays visible to every other rule, and a generic value that
//! runs into a rule's match does not hide it.

use steadfast::{Sanitizer, sanitize};

/// Random-looking, made up for the test.
const VALUE: &str = "q8Zx7R2pLk5TnVwYs3aBc9dEf0";

#[test]
fn a_key_shape_turned_down_leaves_its_value_to_the_generic_layer() {
    // `token_for_upload` is an api-key shape (`token_…`) without a random run: the shape's
    // check turns it down, and the credential word and the value after it must still be seen.
    for text in [
        format!("token_for_upload: {VALUE}"),
        format!("upload failed: key_for_backup={VALUE}"),
        format!("secret_rotation_job: {VALUE} rejected"),
        format!("api_gateway_token -> {VALUE}"),
    ] {
        let out = sanitize(&text);
        assert!(!out.contains(VALUE), "{text:?} -> {out:?}");
        assert!(out.contains("[redacted]"), "{text:?} -> {out:?}");
    }
    // The same value in prose was redacted already; the two must agree.
    assert!(!sanitize(&format!("the upload token is {VALUE}")).contains(VALUE));
}

#[test]
fn turned_down_spans_without_a_value_stay() {
    for text in [
        "token_for_upload: pending",
        "api-gateway-timeout after 30s",
        "key_rotation_days: 90",
        "Bearer authentication is required",
    ] {
        assert_eq!(sanitize(text), text);
    }
}

const PEM_BODY: &str = "MIIEvFakeEXAMPLE0123456789testTESTFakeEXAMPLE01234";

fn pem() -> String {
    format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----")
}

#[test]
fn a_user_password_pair_does_not_swallow_the_head_of_a_private_key() {
    // Found by `embedded_secrets_are_redacted`: `A:` + two non-BMP characters + `=` + a PEM
    // key. The generic `user:password` took `…=-----BEGIN` as a password, and the scan went
    // on after it, where the key block no longer starts with `-----BEGIN`.
    for glue in [
        "A:\u{1D538}\u{1D539}=",
        "A:xx=",
        "deploy:Zf3D0LXCM3EI=",
        "A:",
    ] {
        let text = format!("{glue}{}", pem());
        let out = sanitize(&text);
        assert!(!out.contains(&PEM_BODY[..10]), "{text:?} -> {out:?}");
        assert!(!out.contains(&PEM_BODY[PEM_BODY.len() - 10..]), "{out:?}");
    }
}

#[test]
fn a_generic_value_cut_short_by_a_rule_keeps_both_redactions() {
    let s = Sanitizer::default_rules();
    let text = format!(
        "backup:Zf3D0LXCM3EIMbgJ-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY----- done"
    );
    let out = s.sanitize(&text);
    assert!(!out.contains("Zf3D0LXCM3EI"), "{out:?}");
    assert!(!out.contains(&PEM_BODY[..10]), "{out:?}");
    assert!(out.ends_with(" done"), "{out:?}");
    assert_eq!(s.sanitize(&out), out);
}

// Found by `fragments_never_panic_and_are_idempotent` in CI: a value on the next line was
// redacted and the address kept in front of it survived the pass, so sanitizing the result
// redacted it then (not idempotent, and the address reached the first reader).
#[test]
fn what_a_match_keeps_in_front_of_its_value_is_looked_at_too() {
    let text = "-----END PRIVATE KEY-----10.0.0.1\nabc123DEF456ghi789";
    let once = sanitize(text).into_owned();
    assert!(!once.contains("10.0.0.1"), "{once}");
    assert!(!once.contains("abc123DEF456ghi789"), "{once}");
    assert_eq!(sanitize(&once), once);
}

// Also found by that property: a quoted value redacted up to a space, then on a second look
// the quoted `[redacted] …` taken whole. Scans run until nothing changes.
#[test]
fn sanitizing_runs_until_nothing_changes() {
    let text = r#"api-key=\"=f (/a.js:1:2)\""#;
    let once = sanitize(text).into_owned();
    assert_eq!(sanitize(&once), once);
}

// Found by `embedded_secrets_are_redacted`: markup whose element name is a key
// (`<AGE-SECRET-KEY-1…>𚿽®<`) was turned down for its short content, and the scan went on after
// the element name, past the key in it.
#[test]
fn a_key_inside_markup_turned_down_is_still_redacted() {
    let key = "AGE-SECRET-KEY-1FAKE0EXAMPLE1TEST2FAKE0EXAMPLE1TEST2FAKE0EXAMPLE1TEST2FAKE";
    let text = format!("<{key}>𚿽®<");
    let out = sanitize(&text);
    assert!(!out.contains(key), "{out}");
}
