//! The gate's byte classes, 64 bytes at a time: SIMD compares (AVX2 when the CPU has it, SSE2,
//! which every x86_64 CPU has, otherwise; a byte at a time elsewhere) turned into bit masks.

#[cfg(not(target_arch = "x86_64"))]
use super::{is_tok, ws};

/// Bit masks of one block of 64 bytes, one bit a byte.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Masks {
    /// `=`, `%`, `:`, `-`, `_`, `/`, `+`, `<`: looked at by `confirm` whatever surrounds them.
    pub(super) rare: u64,
    pub(super) dot: u64,
    pub(super) paren: u64,
    pub(super) newline: u64,
    pub(super) digit: u64,
    /// Quotes and whitespace (what follows a login call's `(`).
    pub(super) quote_space: u64,
    /// What a stack frame's or traceback's line starts with: ` `, `\t`, `T`, `F`, `s`.
    pub(super) head: u64,
    /// Token bytes (`[A-Za-z0-9_-]`).
    pub(super) tok: u64,
}

impl Masks {
    /// The bytes `confirm` is asked about: a `.` between digits, a `(` before a quote or a
    /// space, a newline before a line that may start a frame. At the block's edges the
    /// neighbour is unknown, so the byte is asked about.
    pub(super) fn candidates(&self) -> u64 {
        const LAST: u64 = 1 << 63;
        self.rare
            | (self.dot & ((self.digit << 1) | 1) & ((self.digit >> 1) | LAST))
            | (self.paren & ((self.quote_space >> 1) | LAST))
            | (self.newline & ((self.head >> 1) | LAST))
    }
}

/// The byte classes of one vector `x`, written once for every width: `eq`, `or`, `within` and
/// `bits` as the caller's width defines them, `and`/`andnot`/`splat` its intrinsics. Adds
/// each class's bits to `m` and gives the vector of lowered bytes (spaces for whitespace).
/// (Once, so the SSE2 path, which this machine's tests do not run when it has AVX2, cannot
/// drift from the AVX2 one.)
macro_rules! classes {
    ($m:ident, $x:ident, $eq:ident, $or:ident, $within:ident, $bits:ident, $and:path, $andnot:path, $splat:path) => {{
        let folded = $or($x, $splat(0x20));
        let digit = $within($x, b'0', 10);
        let space = $or($within($x, 9, 5), $eq(b' '));
        $m.tok |= $bits($or(
            $or($within(folded, b'a', 26), digit),
            $or($eq(b'_'), $eq(b'-')),
        ));
        $m.rare |= $bits($or(
            $or($or($eq(b'='), $eq(b'%')), $or($eq(b':'), $eq(b'-'))),
            $or($or($eq(b'_'), $eq(b'/')), $or($eq(b'+'), $eq(b'<'))),
        ));
        $m.dot |= $bits($eq(b'.'));
        $m.paren |= $bits($eq(b'('));
        $m.newline |= $bits($eq(b'\n'));
        $m.digit |= $bits(digit);
        $m.quote_space |= $bits($or(space, $or($eq(b'"'), $eq(b'\''))));
        $m.head |= $bits($or(
            $or($eq(b' '), $eq(b'\t')),
            $or($or($eq(b'T'), $eq(b'F')), $eq(b's')),
        ));
        let upper = $within($x, b'A', 26);
        let lowered = $or($x, $and(upper, $splat(0x20)));
        $or($and(space, $splat(b' ' as i8)), $andnot(space, lowered))
    }};
}

/// One block of 64 bytes: its lowercased copy with whitespace made a space, and its masks.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
pub(super) fn classify(block: &[u8; 64], low: &mut [u8; 64], avx2: bool) -> Masks {
    if avx2 {
        // SAFETY: `avx2` is true only when the CPU has AVX2 (checked in `Gate::new`).
        return unsafe { classify_avx2(block, low) };
    }
    // SSE2 is part of every x86_64 target: 16 bytes per compare, `movemask` for the bits.
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_storeu_si128, _mm_sub_epi8,
    };
    let mut m = Masks::default();
    for q in 0..4 {
        // SAFETY: SSE2 is always available on x86_64; the loads and stores are unaligned ones
        // of 16 bytes inside the two 64-byte arrays.
        unsafe {
            let x = _mm_loadu_si128(block.as_ptr().add(16 * q).cast::<__m128i>());
            let eq = |c: u8| _mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8));
            let or = |a, b| _mm_or_si128(a, b);
            // `v - lo` as unsigned is below `n` exactly when v is in lo..lo + n.
            let within = |v: __m128i, lo: u8, n: u8| {
                let d = _mm_sub_epi8(v, _mm_set1_epi8(lo as i8));
                _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((n - 1) as i8)), d)
            };
            let bits = |v| u64::from(_mm_movemask_epi8(v) as u16) << (16 * q);
            let out = classes!(
                m,
                x,
                eq,
                or,
                within,
                bits,
                _mm_and_si128,
                _mm_andnot_si128,
                _mm_set1_epi8
            );
            _mm_storeu_si128(low.as_mut_ptr().add(16 * q).cast::<__m128i>(), out);
        }
    }
    m
}

/// [`classify`] with AVX2: 32 bytes per compare.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unused_unsafe)]
unsafe fn classify_avx2(block: &[u8; 64], low: &mut [u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256,
        _mm256_min_epu8, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
        _mm256_storeu_si256, _mm256_sub_epi8,
    };
    let mut m = Masks::default();
    for q in 0..2 {
        // SAFETY: the caller checked for AVX2; the loads and stores are unaligned ones of 32
        // bytes inside the two 64-byte arrays.
        unsafe {
            let x = _mm256_loadu_si256(block.as_ptr().add(32 * q).cast::<__m256i>());
            let eq = |c: u8| _mm256_cmpeq_epi8(x, _mm256_set1_epi8(c as i8));
            let or = |a, b| _mm256_or_si256(a, b);
            let within = |v: __m256i, lo: u8, n: u8| {
                let d = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
                _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8((n - 1) as i8)), d)
            };
            let bits = |v| u64::from(_mm256_movemask_epi8(v) as u32) << (32 * q);
            let out = classes!(
                m,
                x,
                eq,
                or,
                within,
                bits,
                _mm256_and_si256,
                _mm256_andnot_si256,
                _mm256_set1_epi8
            );
            _mm256_storeu_si256(low.as_mut_ptr().add(32 * q).cast::<__m256i>(), out);
        }
    }
    m
}

/// One block of 64 bytes (see the x86_64 version), a byte at a time.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn classify(block: &[u8; 64], low: &mut [u8; 64], _: bool) -> Masks {
    let mut m = Masks::default();
    for (k, &b) in block.iter().enumerate() {
        let bit = 1u64 << k;
        let set = |mask: &mut u64, yes: bool| {
            if yes {
                *mask |= bit;
            }
        };
        set(&mut m.tok, is_tok(b));
        set(
            &mut m.rare,
            matches!(b, b'=' | b'%' | b':' | b'-' | b'_' | b'/' | b'+' | b'<'),
        );
        set(&mut m.dot, b == b'.');
        set(&mut m.paren, b == b'(');
        set(&mut m.newline, b == b'\n');
        set(&mut m.digit, b.is_ascii_digit());
        set(&mut m.quote_space, ws(b) || b == b'"' || b == b'\'');
        set(&mut m.head, matches!(b, b' ' | b'\t' | b'T' | b'F' | b's'));
        low[k] = if ws(b) { b' ' } else { b.to_ascii_lowercase() };
    }
    m
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::classify;

    /// The SSE2 path (what a CPU without AVX2 runs) classifies every byte as the AVX2 one does:
    /// on a machine with AVX2 the gate's own tests never reach it.
    #[test]
    fn sse2_and_avx2_classify_alike() {
        if !std::is_x86_feature_detected!("avx2") {
            return; // this machine runs the SSE2 path everywhere: the gate's tests cover it
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..2000 {
            let mut block = [0u8; 64];
            for (i, b) in block.iter_mut().enumerate() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Every byte value in the first rounds, then text-like bytes.
                *b = if round < 4 {
                    (round * 64 + i) as u8
                } else {
                    (seed % 128) as u8
                };
            }
            let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
            let sse2 = classify(&block, &mut a, false);
            let avx2 = classify(&block, &mut b, true);
            assert_eq!(sse2, avx2, "{block:?}");
            assert_eq!(a, b, "lowered bytes of {block:?}");
        }
    }
}
