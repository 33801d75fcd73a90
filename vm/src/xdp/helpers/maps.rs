//! Map helpers (kernel/bpf/helpers.c): lookup, update, delete, push, pop, peek through the
//! [`Maps`](crate::maps::Maps) registry on the packet's CPU, and `bpf_for_each_map_elem`
//! (kernel/bpf/{arraymap,hashtab}.c `bpf_for_each_*_elem`) as a callback loop.

use super::{HelperResult, XdpEnv, map_index, ret};
use crate::helpers::{CallbackDriver, CallbackLoop, CallbackStep, HelperError, HelperOutcome};
use crate::maps::{Errno, MapType, ValueRef};
use crate::memory::{Memory, RegionId, RegionKind};

pub fn lookup(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.lookup_elem(mem, a[0], a[1], env.run.cpu)?)
}

pub fn update(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env
        .maps
        .update_elem(mem, a[0], a[1], a[2], a[3], env.run.cpu)?)
}

pub fn delete(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.delete_elem(mem, a[0], a[1])?)
}

pub fn push(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.push_elem(mem, a[0], a[1], a[2])?)
}

pub fn pop(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.pop_elem(mem, a[0], a[1])?)
}

pub fn peek(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    ret(env.maps.peek_elem(mem, a[0], a[1])?)
}

/// The name of the scratch region holding the key a for_each callback sees.
pub const FOR_EACH_KEY_REGION: &str = "for_each_map_elem key";

/// `bpf_for_each_map_elem(map, callback, ctx, flags)`: calls `callback(map, &key, &value,
/// ctx, 0)` for each element in the map's iteration order until a callback returns nonzero;
/// answers the number of callbacks made. The elements are listed when the helper is called
/// (value addresses stay valid: map storage never moves).
pub fn for_each_map_elem(env: &mut XdpEnv<'_>, a: [u64; 5], mem: &mut Memory) -> HelperResult {
    let [map, callback, ctx, flags, _] = a;
    if flags != 0 {
        return ret(Errno::EINVAL.as_ret());
    }
    let index = map_index(env.maps, map)?;
    let elements = elements(env, index, mem)?;
    let key_size = env.maps.get(index).expect("checked").key_size();
    let key_region = mem.add_zeroed(
        RegionKind::Other {
            name: FOR_EACH_KEY_REGION.into(),
        },
        key_size,
        false,
    );
    Ok(HelperOutcome::Callbacks(CallbackDriver::Other(Box::new(
        ForEach {
            map,
            callback,
            ctx,
            elements,
            next: 0,
            key_region,
        },
    ))))
}

/// Every (key, value address) of map `index`, as the packet's CPU sees them.
fn elements(
    env: &mut XdpEnv<'_>,
    index: usize,
    mem: &Memory,
) -> Result<Vec<(Vec<u8>, u64)>, HelperError> {
    let map_type = env.maps.get(index).expect("checked").map_type();
    if !matches!(
        map_type,
        MapType::Array
            | MapType::PercpuArray
            | MapType::Hash
            | MapType::PercpuHash
            | MapType::LruHash
            | MapType::LruPercpuHash
    ) {
        return Err(HelperError::Failed(format!(
            "bpf_for_each_map_elem does not iterate {} maps",
            map_type.name()
        )));
    }
    let mut out = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    while let Ok(next) = env.maps.sys_next_key(index, key.as_deref()) {
        let map = env.maps.get_mut(index).expect("checked");
        if let Some(ValueRef::Addr(addr)) = map.lookup(mem, &next, env.run.cpu) {
            out.push((next.clone(), addr));
        }
        key = Some(next);
    }
    Ok(out)
}

struct ForEach {
    map: u64,
    callback: u64,
    ctx: u64,
    elements: Vec<(Vec<u8>, u64)>,
    next: usize,
    key_region: RegionId,
}

impl CallbackLoop for ForEach {
    fn next(&mut self, last: Option<u64>, mem: &mut Memory) -> Result<CallbackStep, HelperError> {
        let stop = last.is_some_and(|r0| r0 != 0);
        let Some((key, value)) = self.elements.get(self.next).filter(|_| !stop) else {
            mem.remove(self.key_region);
            return Ok(CallbackStep::Done(self.next as u64));
        };
        let region = mem.region_mut(self.key_region).expect("live key region");
        region.bytes_mut().copy_from_slice(key);
        let key_addr = region.base();
        self.next += 1;
        Ok(CallbackStep::Call {
            target: self.callback,
            args: [self.map, key_addr, *value, self.ctx, 0],
        })
    }
}
