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
    let bytes = match env.frame.read_bytes(mem, a[1] as u32, a[3] as u32) {
        Ok(b) => b,
        Err(e) => return ret(e.as_ret()),
    };
    mem.slice_mut(a[2], bytes.len())?.copy_from_slice(&bytes);
    ret(0)
}

/// `bpf_xdp_store_bytes(ctx, offset, buf, len)`: `buf` into the packet, fragments included.
pub fn store_bytes(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let (offset, len) = (a[1] as u32, a[3] as u32);
    // The range is checked before `buf` is read, as `bpf_xdp_pointer` comes first.
    if let Err(e) = env.frame.check_bytes(offset, len) {
        return ret(e.as_ret());
    }
    let bytes = mem.slice(a[2], len as usize)?.to_vec();
    ret(errno::ret(env.frame.write_bytes(mem, offset, &bytes)))
}

/// The scratch buffer `bpf_csum_diff` sums in (`struct bpf_scratchpad`, `MAX_BPF_STACK`).
const CSUM_SCRATCH: u64 = 512;

/// `bpf_csum_diff(from, from_size, to, to_size, seed)`: the 32-bit one's complement sum of
/// `to`'s words and the complements of `from`'s, on top of `seed`, as x86-64's
/// `csum_partial` leaves it (unfolded, carries wrapped into 32 bits).
pub fn csum_diff(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [from, from_size, to, to_size, seed] = a;
    let (from_size, to_size) = (from_size as u32 as u64, to_size as u32 as u64);
    if !(from_size | to_size).is_multiple_of(4) || from_size + to_size > CSUM_SCRATCH {
        return ret(Errno::EINVAL.as_ret());
    }
    let from = read_words(mem, from, from_size)?;
    let to = read_words(mem, to, to_size)?;
    let words = from.iter().map(|w| !w).chain(to.iter().copied());
    ret(csum_words(words, seed as u32) as u64)
}

fn read_words(mem: &Memory, addr: u64, size: u64) -> Result<Vec<u32>, HelperError> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let bytes = mem.slice(addr, size as usize)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

/// One's complement sum of 32-bit words and a seed, folded to 32 bits with end-around carry.
pub fn csum_words(words: impl Iterator<Item = u32>, seed: u32) -> u32 {
    let mut sum = seed as u64;
    for w in words {
        sum += w as u64;
    }
    while sum >> 32 != 0 {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
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

/// `bpf_fib_lookup(ctx, params, plen, flags)` over the configured FIB ([`crate::fib`]).
pub fn fib_lookup(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [_, params, plen, flags, _] = a;
    let fib = env.fib.ok_or_else(|| {
        HelperError::Failed(
            "bpf_fib_lookup needs a routing table; none is configured (--fib)".into(),
        )
    })?;
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
    fn csum_folds_carries() {
        assert_eq!(csum_words([0xffff_ffff, 1].into_iter(), 0), 1);
        assert_eq!(csum_words([0x8000_0000, 0x8000_0000].into_iter(), 5), 6);
        assert_eq!(csum_words(std::iter::empty(), 7), 7);
    }
}
