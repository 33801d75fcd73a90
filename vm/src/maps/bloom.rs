//! BLOOM_FILTER (kernel/bpf/bloom_filter.c): `nr_hashes` jhash functions over the value set
//! bits of a power-of-two bit array; peek answers "maybe present" (0) or ENOENT.
//!
//! The kernel seeds the hashes at random unless `BPF_F_ZERO_SEED` is set; bpfemu uses
//! [`MapEnv::hash_seed`](super::spec::MapEnv) instead, so false positives repeat from run to
//! run, and with `BPF_F_ZERO_SEED` they are the kernel's own.

use super::spec::{BPF_ANY, BPF_F_ZERO_SEED, MapEnv, MapSpec};
use super::{Errno, MapResult};

#[derive(Debug)]
pub(crate) struct Bloom {
    bits: Vec<u64>,
    mask: u32,
    nr_hashes: u32,
    seed: u32,
    value_size: usize,
}

impl Bloom {
    pub(crate) fn new(spec: &MapSpec, env: &MapEnv) -> Bloom {
        let nr_hashes = match spec.map_extra as u32 {
            0 => 5,
            n => n,
        };
        let mask = bitset_mask(spec.max_entries, nr_hashes);
        let words = (mask as u64 + 1).div_ceil(64) as usize;
        Bloom {
            bits: vec![0; words],
            mask,
            nr_hashes,
            seed: if spec.map_flags & BPF_F_ZERO_SEED != 0 {
                0
            } else {
                env.hash_seed
            },
            value_size: spec.value_size as usize,
        }
    }

    fn hash(&self, value: &[u8], index: u32) -> u32 {
        let seed = self.seed.wrapping_add(index);
        let h = if value.len().is_multiple_of(4) {
            jhash2(value, seed)
        } else {
            jhash(value, seed)
        };
        h & self.mask
    }

    fn test(&self, bit: u32) -> bool {
        self.bits[bit as usize / 64] & (1 << (bit % 64)) != 0
    }

    /// `bloom_map_push_elem`: only BPF_ANY.
    pub(crate) fn push(&mut self, value: &[u8], flags: u64) -> MapResult<()> {
        if flags != BPF_ANY {
            return Err(Errno::EINVAL);
        }
        let value = &value[..self.value_size];
        for i in 0..self.nr_hashes {
            let bit = self.hash(value, i);
            self.bits[bit as usize / 64] |= 1 << (bit % 64);
        }
        Ok(())
    }

    /// `bloom_map_peek_elem`: 0 when every bit of the value is set.
    pub(crate) fn peek(&self, value: &[u8]) -> MapResult<()> {
        let value = &value[..self.value_size];
        let all = (0..self.nr_hashes).all(|i| self.test(self.hash(value, i)));
        if all { Ok(()) } else { Err(Errno::ENOENT) }
    }
}

/// The bit array size the kernel picks: `max_entries * nr_hashes * 7 / 5` bits rounded up
/// to a power of two (at least 64), or 2^32 bits when that overflows.
fn bitset_mask(max_entries: u32, nr_hashes: u32) -> u32 {
    let bits = max_entries
        .checked_mul(nr_hashes)
        .and_then(|n| (n / 5).checked_mul(7))
        .filter(|n| *n <= 1 << 31);
    match bits {
        None => u32::MAX,
        Some(n) if n <= 64 => 63,
        Some(n) => n.next_power_of_two() - 1,
    }
}

const JHASH_INITVAL: u32 = 0xdead_beef;

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c) ^ c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c) ^ c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn fin(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c = (c ^ b).wrapping_sub(b.rotate_left(14));
    a = (a ^ c).wrapping_sub(c.rotate_left(11));
    b = (b ^ a).wrapping_sub(a.rotate_left(25));
    c = (c ^ b).wrapping_sub(b.rotate_left(16));
    a = (a ^ c).wrapping_sub(c.rotate_left(4));
    b = (b ^ a).wrapping_sub(a.rotate_left(14));
    c = (c ^ b).wrapping_sub(b.rotate_left(24));
    c
}

fn word(bytes: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w[..bytes.len()].copy_from_slice(bytes);
    u32::from_le_bytes(w)
}

/// Bob Jenkins' lookup3 hash over bytes, as the kernel's `jhash` (little-endian host).
pub(crate) fn jhash(key: &[u8], initval: u32) -> u32 {
    let init = JHASH_INITVAL
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&rest[..rest.len().min(4)]));
    if rest.len() > 4 {
        b = b.wrapping_add(word(&rest[4..rest.len().min(8)]));
    }
    if rest.len() > 8 {
        c = c.wrapping_add(word(&rest[8..]));
    }
    fin(a, b, c)
}

/// The kernel's `jhash2` over 32-bit words (`key.len()` a multiple of 4).
pub(crate) fn jhash2(key: &[u8], initval: u32) -> u32 {
    let words: Vec<u32> = key.chunks_exact(4).map(word).collect();
    let init = JHASH_INITVAL
        .wrapping_add((words.len() as u32) << 2)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = &words[..];
    while rest.len() > 3 {
        a = a.wrapping_add(rest[0]);
        b = b.wrapping_add(rest[1]);
        c = c.wrapping_add(rest[2]);
        mix(&mut a, &mut b, &mut c);
        rest = &rest[3..];
    }
    match rest.len() {
        0 => c,
        n => {
            a = a.wrapping_add(rest[0]);
            if n > 1 {
                b = b.wrapping_add(rest[1]);
            }
            if n > 2 {
                c = c.wrapping_add(rest[2]);
            }
            fin(a, b, c)
        }
    }
}
