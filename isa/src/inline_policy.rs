//! Which helper calls Linux 6.18 replaces with inline code in an XDP program
//! (`do_misc_fixups` in kernel/bpf/verifier.c), written once for every part of bpfemu that
//! reproduces it: the verifier's xlated program shows the kernel's rewrite, and both JIT tiers
//! emit a fast path of their own where the rewrite reaches its result without a call.
//!
//! Two helpers are rewritten:
//! - `bpf_get_smp_processor_id`: a load of the running CPU's number.
//! - `bpf_map_lookup_elem` on a map whose ops have `map_gen_lookup` and whose pointer is the
//!   same on every path to the call: ARRAY and PERCPU_ARRAY (`array_map_gen_lookup`,
//!   `percpu_array_map_gen_lookup`: a bounds check on the u32 key, then
//!   `base + index * round_up(value_size, 8)`), and HASH, PERCPU_HASH and LRU_HASH (the
//!   `htab_*_map_gen_lookup` family: a direct call of the map's internal lookup, then the
//!   step from the element to its value).
//!
//! `bpf_tail_call` is marked by the same pass but stays a call, so it is not listed here.

use crate::helpers::id::{GET_SMP_PROCESSOR_ID, MAP_LOOKUP_ELEM};
use crate::uapi::{
    BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LRU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY,
    BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_XSKMAP,
};

/// A helper call the kernel rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlinedHelper {
    /// `bpf_get_smp_processor_id`: always.
    CpuId,
    /// `bpf_map_lookup_elem`: when the map is known and its type is an [`InlinedLookup`].
    MapLookup,
}

/// The helper call `id` if the kernel may rewrite it (a map lookup also needs a map type
/// [`InlinedLookup::of_map_type`] accepts).
pub fn inlined_helper(id: i32) -> Option<InlinedHelper> {
    match id {
        GET_SMP_PROCESSOR_ID => Some(InlinedHelper::CpuId),
        MAP_LOOKUP_ELEM => Some(InlinedHelper::MapLookup),
        _ => None,
    }
}

/// The map types whose `bpf_map_lookup_elem` the kernel rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlinedLookup {
    /// `BPF_MAP_TYPE_ARRAY`.
    Array,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`: the running CPU's copy.
    PerCpuArray,
    /// `BPF_MAP_TYPE_HASH`.
    Hash,
    /// `BPF_MAP_TYPE_PERCPU_HASH`: the running CPU's copy of the element's value.
    PerCpuHash,
    /// `BPF_MAP_TYPE_LRU_HASH`: a hit also sets the element's reference bit.
    LruHash,
    /// `BPF_MAP_TYPE_XSKMAP`: the socket pointer of the slot (`xsk_map_gen_lookup`).
    XskMap,
}

impl InlinedLookup {
    /// The rewrite of a lookup in a map of `map_type` (`enum bpf_map_type`), if any.
    pub fn of_map_type(map_type: u32) -> Option<InlinedLookup> {
        match map_type {
            BPF_MAP_TYPE_HASH => Some(InlinedLookup::Hash),
            BPF_MAP_TYPE_ARRAY => Some(InlinedLookup::Array),
            BPF_MAP_TYPE_PERCPU_HASH => Some(InlinedLookup::PerCpuHash),
            BPF_MAP_TYPE_PERCPU_ARRAY => Some(InlinedLookup::PerCpuArray),
            BPF_MAP_TYPE_LRU_HASH => Some(InlinedLookup::LruHash),
            BPF_MAP_TYPE_XSKMAP => Some(InlinedLookup::XskMap),
            _ => None,
        }
    }

    /// Whether the rewritten code reaches the value without any call: the arrays only (the
    /// hash maps' rewrite still calls the map's lookup). An engine can therefore do these
    /// lookups itself with no more than the map's fixed layout.
    pub fn without_call(self) -> bool {
        matches!(self, InlinedLookup::Array | InlinedLookup::PerCpuArray)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::helper_id;

    #[test]
    fn ids_name_the_kernel_helpers() {
        assert_eq!(helper_id("map_lookup_elem"), Some(MAP_LOOKUP_ELEM));
        assert_eq!(
            helper_id("get_smp_processor_id"),
            Some(GET_SMP_PROCESSOR_ID)
        );
        assert_eq!(inlined_helper(12), None, "bpf_tail_call stays a call");
    }

    #[test]
    fn only_arrays_are_call_free() {
        let call_free: Vec<u32> = (0..40)
            .filter(|&t| InlinedLookup::of_map_type(t).is_some_and(InlinedLookup::without_call))
            .collect();
        assert_eq!(call_free, [2, 6]);
    }
}
