//! Packet helpers of net/core/filter.c: frame bounds (`bpf_xdp_adjust_head/meta/tail`, the
//! arithmetic in [`XdpFrame`](crate::xdp::XdpFrame)), packet bytes
//! (`bpf_xdp_load_bytes/store_bytes`, `bpf_xdp_get_buff_len`, which reach into the
//! fragments of a multi-buffer frame), `bpf_csum_diff`,
//! `bpf_check_mtu` (XDP variant) and `bpf_fib_lookup` (XDP variant, over
//! [`crate::fib`]).

use super::{HelperResult, XdpEnv, ret};
use crate::helpers::HelperError;
use crate::maps::Errno;
use crate::memory::Memory;
use crate::xdp::errno;

pub fn adjust_head(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(errno::ret(env.frame.adjust_head(mem, a[1] as i32)))
}

pub fn adjust_meta(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(errno::ret(env.frame.adjust_meta(mem, a[1] as i32)))
}

pub fn adjust_tail(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(errno::ret(env.frame.adjust_tail(mem, a[1] as i32)))
}

/// `bpf_xdp_get_buff_len(ctx)`: the linear part and the fragments.
pub fn get_buff_len(env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(env.frame.buff_len() as u64)
}

/// `bpf_xdp_load_bytes(ctx, offset, buf, len)`: packet bytes, fragments included, into `buf`.
pub fn load_bytes(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let (offset, len) = (a[1] as u32, a[3] as u32);
    // The range first: a copy is then at most the packet's size.
    if let Err(e) = env.frame.check_bytes(offset, len) {
        return ret(e.as_ret());
    }
    // (The bytes pass through a buffer: `buf` may be packet memory too.)
    let mut scratch = Scratch::new();
    let bytes = scratch.of_len(len as usize);
    env.frame.copy_out_into(mem, offset as usize, bytes);
    mem.slice_mut(a[2], bytes.len())?.copy_from_slice(bytes);
    ret(0)
}

/// The bytes a helper copies between the packet and the program's memory, on the stack for
/// the sizes programs use (a copy on every call allocated before).
struct Scratch {
    small: [u8; Scratch::SMALL],
    large: Vec<u8>,
}

impl Scratch {
    /// The largest copy kept on the stack.
    const SMALL: usize = 256;

    fn new() -> Scratch {
        Scratch {
            small: [0; Scratch::SMALL],
            large: Vec::new(),
        }
    }

    /// `len` bytes to fill.
    fn of_len(&mut self, len: usize) -> &mut [u8] {
        if len <= Scratch::SMALL {
            return &mut self.small[..len];
        }
        self.large.resize(len, 0);
        &mut self.large
    }
}

/// `bpf_xdp_store_bytes(ctx, offset, buf, len)`: `buf` into the packet, fragments included.
pub fn store_bytes(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let (offset, len) = (a[1] as u32, a[3] as u32);
    // The range is checked before `buf` is read, as `bpf_xdp_pointer` comes first.
    if let Err(e) = env.frame.check_bytes(offset, len) {
        return ret(e.as_ret());
    }
    // `buf` may be packet memory: copied out of the way of the write first.
    let source = mem.slice(a[2], len as usize)?;
    let mut scratch = Scratch::new();
    let bytes = scratch.of_len(source.len());
    bytes.copy_from_slice(source);
    ret(errno::ret(env.frame.write_bytes(mem, offset, bytes)))
}

/// `bpf_csum_diff(from, from_size, to, to_size, seed)` as Linux 6.18 has it: no size limit
/// beyond what the verifier proves readable, any length (odd ones too), and three cases: with
/// both buffers, `csum_sub(csum_partial(to, seed), csum_partial(from, 0))`; with `to` alone,
/// `csum_partial(to, seed)`; with `from` alone, `~csum_partial(from, ~seed)`; with neither,
/// the seed. The result is folded to 16 bits (`csum_from32to16`), so it is never above 0xffff.
pub fn csum_diff(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [from, from_size, to, to_size, seed] = a;
    let (from_size, to_size, seed) = (
        from_size as u32 as usize,
        to_size as u32 as usize,
        seed as u32,
    );
    let partial = |addr: u64, len: usize, sum: u32| -> Result<u32, HelperError> {
        Ok(csum_partial(mem.slice(addr, len)?, addr & 1 == 1, sum))
    };
    let sum = match (from_size, to_size) {
        (0, 0) => seed,
        (0, _) => partial(to, to_size, seed)?,
        (_, 0) => !partial(from, from_size, !seed)?,
        _ => csum_add(partial(to, to_size, seed)?, !partial(from, from_size, 0)?),
    };
    ret(csum_from32to16(sum) as u64)
}

/// x86-64's `csum_partial` (arch/x86/lib/csum-partial_64.c): the end-around-carry sum of the
/// buffer's little-endian 64-bit words (the tail zero-padded) on top of `sum`, reduced to 32
/// bits. A buffer at an odd address starts with its first byte as the high half of a 16-bit
/// word and a rotated seed, and the result's two bytes are swapped back at the end.
pub fn csum_partial(bytes: &[u8], odd_address: bool, sum: u32) -> u32 {
    let (mut acc, rest) = match (odd_address, bytes.split_first()) {
        (true, None) => return sum,
        (true, Some((first, rest))) => (sum.rotate_right(8) as u64 + ((*first as u64) << 8), rest),
        (false, _) => (sum as u64, bytes),
    };
    for chunk in rest.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        acc = add_with_carry64(acc, u64::from_le_bytes(word));
    }
    let result = add_with_carry32((acc >> 32) as u32, acc as u32);
    if odd_address {
        (from32to16(result) as u32).swap_bytes() >> 16
    } else {
        result
    }
}

fn add_with_carry64(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

fn add_with_carry32(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s.wrapping_add(carry as u32)
}

/// `csum_add` (include/net/checksum.h): a 32-bit add with end-around carry.
fn csum_add(a: u32, b: u32) -> u32 {
    add_with_carry32(a, b)
}

/// The 16-bit end-around-carry sum of a 32-bit value's halves (x86's `from32to16`).
fn from32to16(a: u32) -> u16 {
    let (s, carry) = ((a >> 16) as u16).overflowing_add(a as u16);
    s.wrapping_add(carry as u16)
}

/// `csum_from32to16` (include/net/checksum.h): the halves added with the carry out of the
/// low half landing in the high one; the high half is the answer.
fn csum_from32to16(sum: u32) -> u16 {
    (sum.wrapping_add(sum.rotate_right(16)) >> 16) as u16
}

/// `BPF_MTU_CHK_RET_FRAG_NEEDED` (`enum bpf_check_mtu_ret`: SUCCESS 0, FRAG_NEEDED 1,
/// SEGS_TOOBIG 2).
const MTU_FRAG_NEEDED: u64 = 1;

/// `bpf_check_mtu(ctx, ifindex, &mtu_len, len_diff, flags)` for XDP (`bpf_xdp_check_mtu`):
/// no flags; ifindex 0 is the receiving device; the length checked is the linear part's (the
/// kernel does not count fragments here), or
/// `*mtu_len + ETH_HLEN` when nonzero, plus `len_diff`, against mtu + hard header length;
/// `*mtu_len` becomes the device's MTU.
pub fn check_mtu(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [_, ifindex, mtu_len, len_diff, flags] = a;
    if flags != 0 {
        return ret(Errno::EINVAL.as_ret());
    }
    let ifindex = match ifindex as u32 {
        0 => env.frame.ingress_ifindex(),
        i => i,
    };
    let Some(dev) = env.device(ifindex) else {
        return ret(Errno::ENODEV.as_ret());
    };
    let given = mem.read(mtu_len, 4)? as u32;
    let mut len = if given != 0 {
        given as i32 + crate::xdp::frame::ETH_HLEN as i32
    } else {
        env.frame.len() as i32
    };
    len = len.wrapping_add(len_diff as i32);
    let dev_len = (dev.mtu + dev.hard_header_len) as i32;
    mem.write(mtu_len, 4, dev.mtu as u64)?;
    ret(if len > dev_len { MTU_FRAG_NEEDED } else { 0 })
}

/// `sizeof(struct bpf_fib_lookup)`.
const FIB_PARAMS: usize = 64;

/// `bpf_fib_lookup(ctx, params, plen, flags)` over the configured FIB ([`crate::fib`]), or
/// without one a fresh network namespace's ([`crate::fib::Fib::fresh_netns`]).
pub fn fib_lookup(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [_, params, plen, flags, _] = a;
    // The runtime always has one: the FIB given, or a fresh namespace's.
    let fib = env
        .fib
        .ok_or_else(|| HelperError::Failed("bpf_fib_lookup: no routing state".into()))?;
    let n = (plen as u32 as usize).min(FIB_PARAMS);
    let mut buf = [0u8; FIB_PARAMS];
    buf[..n].copy_from_slice(mem.slice(params, n)?);
    let r0 = crate::fib::fib_lookup(
        fib,
        &mut buf,
        plen as u32,
        flags as u32,
        env.frame.ingress_ifindex(),
    );
    mem.slice_mut(params, n)?.copy_from_slice(&buf[..n]);
    ret(r0 as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csum_partial_adds_words_with_end_around_carry() {
        assert_eq!(csum_partial(&[0xff; 8], false, 1), 1);
        assert_eq!(csum_partial(&[1, 0, 0, 0], false, 7), 8);
        assert_eq!(csum_partial(&[], false, 7), 7);
        // An odd tail is zero-padded on the right of a little-endian word.
        assert_eq!(
            csum_partial(&[0, 0, 0, 0, 0, 0, 0, 0, 0xab], false, 0),
            0xab
        );
    }

    #[test]
    fn csum_partial_at_an_odd_address_swaps_back() {
        // One byte at an odd address is the high byte of a 16-bit word, swapped back to low.
        assert_eq!(csum_partial(&[0x12], true, 0), 0x12);
        assert_eq!(csum_partial(&[], true, 0x1234_5678), 0x1234_5678);
    }

    #[test]
    fn csum_from32to16_carries_into_the_high_half() {
        assert_eq!(csum_from32to16(0xffff_ffff), 0xffff);
        assert_eq!(csum_from32to16(0x0001_ffff), 0x0001);
        assert_eq!(csum_from32to16(0x1234_0000), 0x1234);
    }
}
