//! The smoke test's data pattern, shared with `probes/smoke.ptx` and `probes/gpuprobe-probe.cpp`:
//! address- and cycle-dependent, so stale data, zeros and misplaced pages all show as mismatches.

/// Value of 32-bit word `w` (byte offset / 4 from the reservation base) in cycle `c`.
pub fn value(w: u64, c: u32) -> u32 {
    (w as u32).wrapping_mul(2_654_435_761) ^ c.wrapping_mul(2_246_822_519) ^ 0xA5A5_A5A5
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn pattern_differs_by_word_and_cycle_and_is_never_zero_early() {
        assert_ne!(value(0, 0), value(1, 0));
        assert_ne!(value(5, 0), value(5, 1));
        assert_eq!(value(0, 0), 0xA5A5_A5A5);
        // The first 8 MiB of words in cycle 0 contain no zero, so "reads zeros" always mismatches.
        assert!((0..(8u64 << 20) / 4).all(|w| value(w, 0) != 0));
    }
}
