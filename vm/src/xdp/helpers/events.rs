//! Event helpers: ring buffers (kernel/bpf/ringbuf.c, through the map registry) and
//! `bpf_perf_event_output` (the XDP variant `bpf_xdp_event_output`, net/core/filter.c), whose
//! events bpfemu records in the outcome instead of a perf ring.

use super::{HelperResult, XdpEnv, map_index, ret};
use crate::maps::{Errno, MapType};
use crate::memory::Memory;
use crate::xdp::runtime::PerfEvent;

pub fn ringbuf_output(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.ringbuf_output(mem, a[0], a[1], a[2], a[3])?)
}

pub fn ringbuf_reserve(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.ringbuf_reserve(mem, a[0], a[1], a[2])?)
}

pub fn ringbuf_submit(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    env.maps.ringbuf_commit(mem, a[0], false)?;
    ret(0)
}

pub fn ringbuf_discard(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    env.maps.ringbuf_commit(mem, a[0], true)?;
    ret(0)
}

pub fn ringbuf_query(env: &mut XdpEnv<'_>, a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    ret(env.maps.ringbuf_query(a[0], a[1])?)
}

const BPF_F_INDEX_MASK: u64 = 0xffff_ffff;
const BPF_F_CURRENT_CPU: u64 = BPF_F_INDEX_MASK;
const BPF_F_CTXLEN_MASK: u64 = 0xf_ffff << 32;

/// `bpf_perf_event_output(ctx, map, flags, data, size)`: the slot is the flags' index (or the
/// packet's CPU with `BPF_F_CURRENT_CPU`); the flags' ctx length appends that many packet
/// bytes to the sample (`bpf_xdp_copy`: fragments included, up to `bpf_xdp_get_buff_len`).
pub fn perf_event_output(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [_, map, flags, data, size] = a;
    if flags & !(BPF_F_CTXLEN_MASK | BPF_F_INDEX_MASK) != 0 {
        return ret(Errno::EINVAL.as_ret());
    }
    let ctx_len = ((flags & BPF_F_CTXLEN_MASK) >> 32) as usize;
    let Some(ctx_bytes) = env.frame.head_bytes(mem, ctx_len) else {
        return ret(Errno::EFAULT.as_ret());
    };
    let index = map_index(env.maps, map)?;
    let perf = env.maps.get(index).expect("checked");
    if perf.map_type() != MapType::PerfEventArray {
        return Err(crate::helpers::HelperError::Failed(format!(
            "map {} is not a perf event array",
            perf.name()
        )));
    }
    let slot = match flags & BPF_F_INDEX_MASK {
        BPF_F_CURRENT_CPU => env.run.cpu as u64,
        i => i,
    };
    if slot >= perf.max_entries() as u64 {
        return ret(Errno::E2BIG.as_ret());
    }
    let Some(event_cpu) = perf.fd_slot(slot as u32) else {
        return ret(Errno::ENOENT.as_ret());
    };
    // A slot's handle is the CPU its event counts on; the kernel only writes into an event
    // of the CPU the program runs on.
    if event_cpu != env.run.cpu {
        return ret(Errno::EOPNOTSUPP.as_ret());
    }
    let mut sample = match size {
        0 => Vec::new(),
        n => mem.slice(data, n as usize)?.to_vec(),
    };
    sample.extend(ctx_bytes);
    env.run.events.push(PerfEvent {
        map: perf.name().to_string(),
        slot: slot as u32,
        data: sample,
    });
    ret(0)
}
