//! The key index of a hash map: key bytes to slot, found by hashing (a program's lookup, the
//! hot path) and walked in ascending byte order (`get_next_key`, bpfemu's deterministic
//! iteration order). Two structures over the same keys: a hash table answers lookups in
//! constant time without comparing whole keys along a tree path, the ordered map answers
//! "the key after this one". Updates and deletes keep both; memory stays bounded by
//! `max_entries`.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Bound;

#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    by_hash: HashMap<Vec<u8>, u32, BuildHasherDefault<KeyHasher>>,
    /// The keys alone: a key moved to another slot (every update of a plain hash) touches
    /// only `by_hash`.
    ordered: BTreeSet<Vec<u8>>,
}

impl KeyIndex {
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u32> {
        self.by_hash.get(key).copied()
    }

    pub(crate) fn contains_key(&self, key: &[u8]) -> bool {
        self.by_hash.contains_key(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Points `key` at `slot` (a new key, or an existing one moved to another slot).
    pub(crate) fn insert(&mut self, key: &[u8], slot: u32) {
        match self.by_hash.get_mut(key) {
            Some(old) => *old = slot,
            None => {
                self.by_hash.insert(key.to_vec(), slot);
                self.ordered.insert(key.to_vec());
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<u32> {
        let slot = self.by_hash.remove(key)?;
        self.ordered.remove(key);
        Some(slot)
    }

    /// The first key in ascending byte order after `key` (after none: the first).
    pub(crate) fn next_after(&self, key: Option<&[u8]>) -> Option<&Vec<u8>> {
        let mut keys = match key {
            Some(k) => self
                .ordered
                .range::<[u8], _>((Bound::Excluded(k), Bound::Unbounded)),
            None => self.ordered.range::<[u8], _>(..),
        };
        keys.next()
    }
}

/// A fast non-cryptographic hash of key bytes, 8 at a time (keys are small: addresses,
/// ports, flow tuples). Map contents come from the program and its input, not from an
/// adversary that could aim at the table's buckets: speed matters more here.
pub(crate) struct KeyHasher {
    state: u64,
}

const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl Default for KeyHasher {
    fn default() -> KeyHasher {
        // Not zero: a zero state would stay zero over zero words, whatever their count.
        KeyHasher { state: MIX }
    }
}

impl KeyHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.state = (self.state.rotate_left(23) ^ word).wrapping_mul(MIX);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "ab" and "ab\0" apart.
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The table picks buckets from the high bits too: fold them in.
        self.state ^ (self.state >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_order_agree_through_updates() {
        let mut index = KeyIndex::default();
        for (i, key) in [[3u8, 0], [1, 9], [2, 0], [1, 0]].iter().enumerate() {
            index.insert(key, i as u32);
        }
        index.insert(&[2, 0], 7);
        assert_eq!(index.get(&[2, 0]), Some(7));
        assert_eq!(index.remove(&[1, 9]), Some(1));
        assert_eq!(index.get(&[1, 9]), None);
        assert_eq!(index.len(), 3);
        let mut walk = vec![];
        let mut at: Option<Vec<u8>> = None;
        while let Some(next) = index.next_after(at.as_deref()) {
            walk.push(next.clone());
            at = Some(next.clone());
        }
        assert_eq!(walk, [vec![1, 0], vec![2, 0], vec![3, 0]]);
        // The index does not ask whether the key is there (get_next_key does): by order.
        assert_eq!(index.next_after(Some(&[1, 5])), Some(&vec![2, 0]));
    }

    #[test]
    fn keys_that_differ_only_in_trailing_zeros_hash_apart() {
        let hash = |bytes: &[u8]| {
            let mut h = KeyHasher::default();
            h.write(bytes);
            h.finish()
        };
        assert_ne!(hash(&[1, 2]), hash(&[1, 2, 0]));
        assert_ne!(hash(&[0; 8]), hash(&[0; 16]));
    }
}
