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
    // Counting without a branch lets the compiler compare several words per instruction (the
    // host check reads over a GiB per device); the first wrong word is looked for only when
    // there is one. Blocks keep the per-block count in 32 bits.
    const BLOCK: usize = 1 << 16;
    let bad: u64 = words
        .chunks(BLOCK)
        .enumerate()
        .map(|(b, block)| {
            let w0 = (first_word as u32).wrapping_add((b * BLOCK) as u32);
            let mut n = 0u32;
            for (i, &x) in block.iter().enumerate() {
                let expected = w0.wrapping_add(i as u32).wrapping_mul(2_654_435_761) ^ s;
                n += u32::from(x != expected);
            }
            u64::from(n)
        })
        .sum();
    if bad == 0 {
        return (0, None);
    }
    let first = words
        .iter()
        .zip(first_word..)
        .find(|&(&x, w)| x != value(w, seed))
        .map(|(_, w)| w);
    (bad, first)
}

/// [`compare`] split over up to `threads` threads: the host check reads over a GiB per device,
/// which one core compares at about 4-5 GB/s and a PCIe 5 copy delivers at over 50 GB/s.
pub fn compare_parallel(
    words: &[u32],
    first_word: u64,
    seed: u32,
    threads: usize,
) -> (u64, Option<u64>) {
    // Below this a thread costs more than it saves.
    const MIN_PART: usize = 1 << 18;
    let parts = threads.clamp(1, words.len().div_ceil(MIN_PART).max(1));
    if parts == 1 {
        return compare(words, first_word, seed);
    }
    let part = words.len().div_ceil(parts);
    std::thread::scope(|scope| {
        let running: Vec<_> = words
            .chunks(part)
            .enumerate()
            .map(|(i, chunk)| {
                let first = first_word + (i * part) as u64;
                (
                    chunk,
                    first,
                    scope.spawn(move || compare(chunk, first, seed)),
                )
            })
            .collect();
        let mut bad = 0;
        let mut first_bad = None;
        for (chunk, first, handle) in running {
            // A part whose thread failed is compared here instead: a lost part would hide words.
            let (n, at) = handle
                .join()
                .unwrap_or_else(|_| compare(chunk, first, seed));
            bad += n;
            first_bad = first_bad.or(at);
        }
        (bad, first_bad)
    })
}

/// Threads for the host comparison: a few, not the whole machine (several devices compare at
/// once in the shared child).
pub fn compare_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

#[cfg(test)]
mod tests {
    use super::{compare, compare_parallel, seed, value};

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

    #[test]
    fn counting_in_blocks_keeps_word_indices_across_blocks_and_wraparound() {
        let s = seed(7, 2);
        // Starts just below 2^32 words, so the 32-bit word index wraps inside the second block.
        let first = u64::from(u32::MAX) - 70_000;
        let n = 200_000u64;
        let mut words: Vec<u32> = (first..first + n).map(|w| value(w, s)).collect();
        assert_eq!(compare(&words, first, s), (0, None));
        words[65_536 + 5] ^= 0x100;
        words[150_000] = 0;
        assert_eq!(compare(&words, first, s), (2, Some(first + 65_541)));
    }

    #[test]
    fn the_parallel_comparison_agrees_with_the_plain_one() {
        let s = seed(2, 1);
        let first = 5_000u64;
        let n = 3 * (1u64 << 18) + 12_345;
        let mut words: Vec<u32> = (first..first + n).map(|w| value(w, s)).collect();
        for t in [1, 2, 3, 4, 16] {
            assert_eq!(
                compare_parallel(&words, first, s, t),
                (0, None),
                "{t} threads"
            );
        }
        // Wrong words in the second and last parts: the count adds up, the first is the earliest.
        words[(1 << 18) + 7] = 0;
        words[(n - 1) as usize] ^= 1;
        words[(2 << 18) + 1] ^= 0x8000;
        let plain = compare(&words, first, s);
        assert_eq!(plain, (3, Some(first + (1 << 18) + 7)));
        for t in [1, 2, 3, 4, 16] {
            assert_eq!(compare_parallel(&words, first, s, t), plain, "{t} threads");
        }
    }
}
