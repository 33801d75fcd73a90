//! The deterministic machine ([`crate::xdp::determinism`]): clocks, random numbers, CPU and
//! NUMA ids; and kernel/bpf/helpers.c's `bpf_spin_lock/unlock`, `bpf_strncmp`, `bpf_loop`.

use super::{HelperResult, XdpEnv, ret};
use crate::helpers::{CallbackDriver, CountedLoop, HelperError, HelperOutcome};
use crate::maps::Errno;
use crate::memory::Memory;

pub fn ktime_get_ns(env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(env.run.clock.ns())
}

pub fn ktime_get_coarse_ns(env: &mut XdpEnv<'_>, _a: [u64; 5], _m: &mut Memory) -> HelperResult {
    ret(env.run.clock.coarse_ns())
}

pub fn jiffies64(env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(env.run.clock.jiffies64())
}

pub fn get_prandom_u32(env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(env.prandom.next_u32(env.run.cpu) as u64)
}

pub fn get_smp_processor_id(env: &mut XdpEnv<'_>, _a: [u64; 5], _m: &mut Memory) -> HelperResult {
    ret(env.run.cpu as u64)
}

pub fn get_numa_node_id(_env: &mut XdpEnv<'_>, _a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(0)
}

/// `bpf_spin_lock(lock)`: the lock word becomes 1. One packet runs at a time, so a lock is
/// never contended; taking a held lock (which would hang the kernel) is an error.
pub fn spin_lock(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    if mem.read(a[0], 4)? != 0 {
        return Err(HelperError::Failed(format!(
            "bpf_spin_lock on {}, which is held already: this would deadlock",
            mem.place(a[0])
        )));
    }
    mem.write(a[0], 4, 1)?;
    ret(0)
}

/// `bpf_spin_unlock(lock)`: the lock word becomes 0.
pub fn spin_unlock(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    mem.write(a[0], 4, 0)?;
    ret(0)
}

/// The NUL-terminated string at `addr`, without the NUL, reading at most `max` bytes; `None`
/// when unreadable memory comes first.
pub fn read_cstr(mem: &Memory, addr: u64, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..max as u64 {
        match mem.read(addr.wrapping_add(i), 1).ok()? as u8 {
            0 => break,
            b => out.push(b),
        }
    }
    Some(out)
}

/// `bpf_strncmp(s1, s1_sz, s2)`: `strncmp(s1, s2, s1_sz)` reduced to -1, 0 or 1.
pub fn strncmp(_env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let n = a[1] as u32 as usize;
    let s1 = if n == 0 { &[][..] } else { mem.slice(a[0], n)? };
    let s2 = read_cstr(mem, a[2], n).ok_or_else(|| {
        HelperError::Failed(format!("bpf_strncmp: {} is no string", mem.place(a[2])))
    })?;
    let ord = c_strncmp(s1, &s2);
    ret(ord as i64 as u64)
}

/// C's `strncmp` over `a` (its length is `n`) and `b` (a string without its NUL), as -1/0/1.
fn c_strncmp(a: &[u8], b: &[u8]) -> i32 {
    for (i, &x) in a.iter().enumerate() {
        let y = b.get(i).copied().unwrap_or(0);
        if x != y {
            return if x < y { -1 } else { 1 };
        }
        if x == 0 {
            return 0;
        }
    }
    0
}

/// The kernel's `BPF_MAX_LOOPS` for `bpf_loop`.
pub const BPF_LOOP_MAX: u64 = 1 << 23;

/// `bpf_loop(nr_loops, callback, ctx, flags)`: calls `callback(i, ctx)` for i = 0, 1, ...
/// until `nr_loops` calls or a nonzero return; answers the number of calls.
///
/// Two kernels' worth of semantics: when the flags are zero the verifier (6.18's
/// `inline_bpf_loop`) replaces the call with a loop of its own, which compares all 64 bits of
/// `nr_loops` with [`BPF_LOOP_MAX`] and answers E2BIG with a 32-bit move (0x00000000fffffff9).
/// Otherwise the helper runs: it refuses the flags (EINVAL, sign-extended). The kernel inlines
/// only where the verifier proved the flags zero at every visit; bpfemu decides on the flags'
/// value at run time, which differs only for flags that are zero but unknown to the verifier
/// (the helper then takes `nr_loops` as a u32).
pub fn bpf_loop(_env: &mut XdpEnv<'_>, a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    let [nr, callback, ctx, flags, _] = a;
    if flags != 0 {
        return ret(Errno::EINVAL.as_ret());
    }
    if nr > BPF_LOOP_MAX {
        return ret(Errno::E2BIG.as_ret() as u32 as u64);
    }
    Ok(HelperOutcome::Callbacks(CallbackDriver::Counted(
        CountedLoop::new(nr, callback, ctx),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strncmp_like_c() {
        assert_eq!(c_strncmp(b"abc", b"abc"), 0);
        assert_eq!(c_strncmp(b"abd", b"abc"), 1);
        assert_eq!(c_strncmp(b"ab", b"abc"), 0);
        assert_eq!(c_strncmp(b"ab\0x", b"ab"), 0);
        assert_eq!(c_strncmp(b"abc", b"ab"), 1);
        assert_eq!(c_strncmp(b"\x80", b"a"), 1);
    }
}
