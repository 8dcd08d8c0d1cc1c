//! The smoke test's data pattern, shared with `probes/smoke.ptx` and `probes/gpuprobe-probe.cpp`:
//! address- and seed-dependent, so stale data, zeros and misplaced pages all show as mismatches.

/// Value of 32-bit word `w` (byte offset / 4 from the pool's base) for `seed`.
pub fn value(w: u64, seed: u32) -> u32 {
    (w as u32).wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(2_246_822_519) ^ 0xA5A5_A5A5
}

/// The seed of pool `pool` in cycle `cycle`: every pool of every cycle holds different data, so a
/// write that lands in another pool, or data left from an earlier cycle, is caught.
pub fn seed(cycle: u32, pool: u32) -> u32 {
    (cycle << 3) | (pool & 7)
}

/// Compares host words that start at word index `first_word` with the pattern; returns the number
/// of wrong words and the index of the first one.
pub fn compare(words: &[u32], first_word: u64, seed: u32) -> (u64, Option<u64>) {
    let s = seed.wrapping_mul(2_246_822_519) ^ 0xA5A5_A5A5;
    let mut w = first_word as u32;
    let mut bad = 0u64;
    let mut first = None;
    // A plain loop: fast enough unoptimised too (tests run debug builds over 100+ MiB).
    for (i, &x) in words.iter().enumerate() {
        if x != w.wrapping_mul(2_654_435_761) ^ s {
            bad += 1;
            if first.is_none() {
                first = Some(first_word + i as u64);
            }
        }
        w = w.wrapping_add(1);
    }
    (bad, first)
}

#[cfg(test)]
mod tests {
    use super::{compare, seed, value};

    #[test]
    fn pattern_differs_by_word_and_seed_and_is_never_zero_early() {
        assert_ne!(value(0, 0), value(1, 0));
        assert_ne!(value(5, 0), value(5, 1));
        assert_eq!(value(0, 0), 0xA5A5_A5A5);
        // The first 8 MiB of words for seed 0 contain no zero, so "reads zeros" always mismatches.
        assert!((0..(8u64 << 20) / 4).all(|w| value(w, 0) != 0));
    }

    #[test]
    fn seeds_separate_pools_and_cycles() {
        assert_ne!(seed(0, 1), seed(0, 2));
        assert_ne!(seed(1, 0), seed(0, 1));
        assert_eq!(seed(3, 2), 26);
    }

    #[test]
    fn host_compare_counts_and_finds_the_first_bad_word() {
        let s = seed(4, 1);
        let mut words: Vec<u32> = (1000..1000 + 4096u64).map(|w| value(w, s)).collect();
        assert_eq!(compare(&words, 1000, s), (0, None));
        words[17] = 0;
        words[300] ^= 1;
        assert_eq!(compare(&words, 1000, s), (2, Some(1017)));
        assert_eq!(compare(&words, 1000, s + 1).0, 4096);
    }
}
