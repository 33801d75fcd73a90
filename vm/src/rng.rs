//! The workspace's one pseudo-random generator: xorshift64* (Vigna), small, fast and the same
//! on every machine, so that generated traffic, random test programs and random helper cases
//! replay from their seed. It is not for anything that needs unpredictability.
//!
//! The traffic generator, the fuzzers and the tests all draw from this one type: a change to
//! the sequence would silently change the committed captures and the corpora's seeds, so the
//! algorithm and its constants live here only.

/// A xorshift64* generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, mixed by the golden-ratio constant so that nearby seeds (0, 1,
    /// 2, ...) start far apart; the low bit is forced so that the state is never zero.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A generator whose state is `state` as given (no mixing): for callers whose seeds name
    /// the raw state, as some tests' recorded seeds do. `state` must not be zero (xorshift
    /// stays at zero forever).
    pub fn from_state(state: u64) -> Rng {
        debug_assert!(state != 0, "a xorshift state of zero never changes");
        Rng(state)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0); the modulo's slight bias does not matter here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_sequence_is_pinned() {
        // Bundled captures and recorded test seeds depend on these outputs.
        let mut raw = Rng::from_state(1);
        assert_eq!(raw.next_u64(), 0x47e4_ce4b_896c_dd1d);
        assert_eq!(raw.next_u64(), 0xabcf_a6a8_e079_651d);
        // Seed 0 mixes to state 1.
        assert_eq!(Rng::new(0).next_u64(), 0x47e4_ce4b_896c_dd1d);
    }
}
