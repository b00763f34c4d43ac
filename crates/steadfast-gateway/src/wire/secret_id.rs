//! Ids a client cannot guess: a task id is all it takes to read or cancel a task, a session id
//! all it takes to use a session.

/// 128 bits from the OS's random source (`getrandom`); should that fail (no entropy source
/// at all), keyed SipHash of the clock under the OS-seeded keys of std's `RandomState`.
pub(crate) fn random_u128() -> u128 {
    let mut bytes = [0u8; 16];
    match getrandom::fill(&mut bytes) {
        Ok(()) => u128::from_le_bytes(bytes),
        Err(_) => unique_u128(),
    }
}

/// 128 bits unique to this call across processes and replicas, without a system call: keyed
/// SipHash of the clock under the OS-seeded keys of std's `RandomState` (new keys per call).
/// For ids that must not collide (per-request call-limit keys, shared through `[state]`) and
/// need not be secret; secrets take [`random_u128`].
pub(crate) fn unique_u128() -> u128 {
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
