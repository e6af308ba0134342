//! The random numbers of scenario expansion: one small generator that gives the same draws
//! for the same seed on every platform.

/// SplitMix64 (Steele, Lea, Flood 2014): small, seedable, and the same on every platform.
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_reference_sequence_and_units_in_zero_to_one() {
        // The first output of SplitMix64 seeded with 0 (Vigna's reference implementation).
        assert_eq!(SplitMix64::new(0).next(), 0xe220_a839_7b1d_cdaf);
        let mut rng = SplitMix64::new(42);
        assert!((0..1000)
            .map(|_| rng.unit())
            .all(|u| (0.0..1.0).contains(&u)));
    }
}
