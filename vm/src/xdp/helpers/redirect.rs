//! Redirects (net/core/filter.c: `bpf_xdp_redirect`, `__bpf_xdp_redirect_map`) and tail
//! calls (kernel/bpf/core.c `JMP_TAIL_CALL`).
//!
//! test_run never performs a redirect; bpfemu records the target the program chose (the
//! kernel's per-CPU `bpf_redirect_info`) and reports it with an `XDP_REDIRECT` verdict.

use super::{HelperResult, XdpEnv, map_index, ret};
use crate::helpers::{HelperError, HelperOutcome};
use crate::maps::MapType;
use crate::memory::Memory;
use crate::xdp::runtime::{RedirectTarget, XDP_ABORTED, XDP_REDIRECT};

/// `BPF_F_BROADCAST` and `BPF_F_EXCLUDE_INGRESS` (devmaps only).
pub const BPF_F_BROADCAST: u64 = 1 << 3;
pub const BPF_F_EXCLUDE_INGRESS: u64 = 1 << 4;
/// The low flag bits `bpf_redirect_map` answers with when the key is absent.
const ACTION_MASK: u64 = 3;
/// The kernel's `MAX_TAIL_CALL_CNT`.
pub const MAX_TAIL_CALL_CNT: u32 = 33;

/// `bpf_redirect(ifindex, flags)`: no flags are defined for XDP.
pub fn redirect(env: &mut XdpEnv<'_>, a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    if a[1] != 0 {
        return ret(XDP_ABORTED as u64);
    }
    env.run.redirect = Some(RedirectTarget::Ifindex(a[0] as u32));
    ret(XDP_REDIRECT as u64)
}

/// `bpf_redirect_map(map, key, flags)`: flags outside the action bits and the map type's
/// own flags give `XDP_ABORTED`; an absent key (unless broadcasting) clears the target and
/// answers the flags' action bits; else the target is recorded and the answer is
/// `XDP_REDIRECT`.
pub fn redirect_map(env: &mut XdpEnv<'_>, a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    let [handle, key, flags, _, _] = a;
    let index = map_index(env.maps, handle)?;
    let map = env.maps.get(index).expect("checked");
    let key = key as u32;
    let name = map.shared_name();
    let flag_mask = match map.map_type() {
        MapType::Devmap | MapType::DevmapHash => BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
        MapType::Cpumap | MapType::Xskmap => 0,
        other => {
            return Err(HelperError::Failed(format!(
                "bpf_redirect_map on map {name}, a {} map, which is no redirect map",
                other.name()
            )));
        }
    };
    if flags & !(ACTION_MASK | flag_mask) != 0 {
        return ret(XDP_ABORTED as u64);
    }
    let broadcast = flags & BPF_F_BROADCAST != 0;
    let target = match map.map_type() {
        MapType::Cpumap => map.cpumap_get(key).map(|_| RedirectTarget::Cpu {
            map: name.clone(),
            cpu: key,
        }),
        MapType::Xskmap => map.xsk_get(key).map(|_| RedirectTarget::Xsk {
            map: name.clone(),
            queue: key,
        }),
        _ => map
            .devmap_get(key)
            .map(|val| Some(val.first))
            .or(broadcast.then_some(None))
            .map(|ifindex| RedirectTarget::Dev {
                map: name.clone(),
                key,
                ifindex,
                broadcast,
                exclude_ingress: broadcast && flags & BPF_F_EXCLUDE_INGRESS != 0,
            }),
    };
    env.run.redirect = target;
    match env.run.redirect {
        Some(_) => ret(XDP_REDIRECT as u64),
        None => ret(flags & ACTION_MASK),
    }
}

/// `bpf_tail_call(ctx, prog_array, index)`: falls through (the call returns) when the index's
/// low 32 bits are past the array, when [`MAX_TAIL_CALL_CNT`] tail calls were taken, or when
/// the slot is empty. Only a call that goes somewhere counts toward the limit (6.18's JIT and
/// interpreter both count after finding the program).
pub fn tail_call(env: &mut XdpEnv<'_>, a: [u64; 5], _mem: &mut Memory) -> HelperResult {
    match tail_call_target(env, a[1], a[2])? {
        Some(prog) => Ok(HelperOutcome::TailCall(prog)),
        None => ret(0),
    }
}

/// Where `bpf_tail_call` through `prog_array` at `index` goes: a program (the call counted),
/// or `None` when it falls through. An error leaves the count as it was.
pub(super) fn tail_call_target(
    env: &mut XdpEnv<'_>,
    prog_array: u64,
    index: u64,
) -> Result<Option<usize>, HelperError> {
    let map_at = map_index(env.maps, prog_array)?;
    let map = env.maps.get(map_at).expect("checked");
    if map.map_type() != MapType::ProgArray {
        return Err(HelperError::Failed(format!(
            "bpf_tail_call on map {}, which is not a prog array",
            map.name()
        )));
    }
    let slot = index as u32;
    if slot >= map.max_entries() || env.run.tail_calls >= MAX_TAIL_CALL_CNT {
        return Ok(None);
    }
    let Some(prog) = map.prog_array_get(slot) else {
        return Ok(None);
    };
    if let Some(e) = env.unprepared.get(prog as usize).and_then(Option::as_ref) {
        return Err(HelperError::Failed(format!("tail call into {e}")));
    }
    env.run.tail_calls += 1;
    Ok(Some(prog as usize))
}
