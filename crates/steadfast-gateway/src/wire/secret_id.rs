//! Ids a client cannot guess: a task id is all it takes to read or cancel a task, a session id
//! all it takes to use a session.

/// 128 bits of keyed SipHash from the OS-seeded `RandomState` (the jitter's fast generator is
/// predictable from its outputs).
pub(crate) fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut out = 0u128;
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out = (out << 64) | u128::from(h.finish());
    }
    out
}

/// [`random_u128`] as 32 hex digits.
pub(crate) fn random_hex() -> String {
    format!("{:032x}", random_u128())
}
