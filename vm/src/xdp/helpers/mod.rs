//! The helpers XDP programs may call in bpfemu, in one table ([`HELPERS`]): the load-time check
//! ([`super::prepare`]) and the dispatch both read it, so a helper is either in the table and
//! works, or is refused when the program is prepared, by name.
//!
//! One file per family: [`maps`] (map operations and `bpf_for_each_map_elem`), [`packet`]
//! (frame bounds, packet bytes, checksums, MTU, FIB), [`redirect`] (redirects and tail
//! calls), [`events`] (ring buffers, perf events), [`printk`] (`bpf_trace_printk`,
//! `bpf_snprintf`; their formatting in [`bprintf`]), [`socket`] (socket lookups in the run's
//! socket table), [`misc`] (clocks, random numbers, CPU, locks, strings, `bpf_loop`).

pub mod bprintf;
pub mod events;
pub mod maps;
pub mod misc;
pub mod packet;
pub mod printk;
pub mod redirect;
pub mod socket;

use super::determinism::{Clock, Prandom};
use super::frame::XdpFrame;
use super::runtime::{NetDevice, PerfEvent, RedirectTarget};
use crate::fib::Fib;
use crate::helpers::{HelperError, HelperOutcome, Helpers, MapOp, TailJump};
use crate::maps::Maps;
use crate::memory::Memory;
use crate::taint::Footprint;
use bpfemu_isa::helpers::id;

/// What a helper answers.
pub type HelperResult = Result<HelperOutcome, HelperError>;
/// A helper: the run's environment, r1-r5, the memory.
pub type HelperFn = fn(&mut XdpEnv<'_>, [u64; 5], &mut Memory) -> HelperResult;

/// One implemented helper.
pub struct HelperDef {
    /// `enum bpf_func_id` (include/uapi/linux/bpf.h).
    pub id: i32,
    /// The name without `bpf_`.
    pub name: &'static str,
    pub f: HelperFn,
    /// The implementing function's path in this module (`maps::lookup`), for the helper table.
    pub implementation: &'static str,
}

/// Each helper named by its id in the one list (`bpfemu_isa::helpers::id`), which also gives
/// its name: nothing here spells a helper's number.
macro_rules! helpers {
    ($($id:ident => $f:path,)*) => {
        /// Every helper bpfemu implements for XDP programs, by id.
        pub const HELPERS: &[HelperDef] = &[
            $(HelperDef {
                id: id::$id,
                name: bpfemu_isa::helpers::HELPER_NAMES[id::$id as usize],
                f: $f,
                implementation: stringify!($f),
            },)*
        ];
    };
}

helpers! {
    MAP_LOOKUP_ELEM => maps::lookup,
    MAP_UPDATE_ELEM => maps::update,
    MAP_DELETE_ELEM => maps::delete,
    KTIME_GET_NS => misc::ktime_get_ns,
    TRACE_PRINTK => printk::trace_printk,
    GET_PRANDOM_U32 => misc::get_prandom_u32,
    GET_SMP_PROCESSOR_ID => misc::get_smp_processor_id,
    TAIL_CALL => redirect::tail_call,
    REDIRECT => redirect::redirect,
    PERF_EVENT_OUTPUT => events::perf_event_output,
    CSUM_DIFF => packet::csum_diff,
    GET_NUMA_NODE_ID => misc::get_numa_node_id,
    XDP_ADJUST_HEAD => packet::adjust_head,
    REDIRECT_MAP => redirect::redirect_map,
    XDP_ADJUST_META => packet::adjust_meta,
    XDP_ADJUST_TAIL => packet::adjust_tail,
    FIB_LOOKUP => packet::fib_lookup,
    SK_LOOKUP_TCP => socket::sk_lookup_tcp,
    SK_LOOKUP_UDP => socket::sk_lookup_udp,
    SK_RELEASE => socket::sk_release,
    MAP_PUSH_ELEM => maps::push,
    MAP_POP_ELEM => maps::pop,
    MAP_PEEK_ELEM => maps::peek,
    SPIN_LOCK => misc::spin_lock,
    SPIN_UNLOCK => misc::spin_unlock,
    SKC_LOOKUP_TCP => socket::skc_lookup_tcp,
    TCP_CHECK_SYNCOOKIE => socket::tcp_check_syncookie,
    JIFFIES64 => misc::jiffies64,
    KTIME_GET_BOOT_NS => misc::ktime_get_ns,
    RINGBUF_OUTPUT => events::ringbuf_output,
    RINGBUF_RESERVE => events::ringbuf_reserve,
    RINGBUF_SUBMIT => events::ringbuf_submit,
    RINGBUF_DISCARD => events::ringbuf_discard,
    RINGBUF_QUERY => events::ringbuf_query,
    KTIME_GET_COARSE_NS => misc::ktime_get_coarse_ns,
    CHECK_MTU => packet::check_mtu,
    FOR_EACH_MAP_ELEM => maps::for_each_map_elem,
    SNPRINTF => printk::snprintf,
    TRACE_VPRINTK => printk::trace_vprintk,
    LOOP => misc::bpf_loop,
    STRNCMP => misc::strncmp,
    XDP_GET_BUFF_LEN => packet::get_buff_len,
    XDP_LOAD_BYTES => packet::load_bytes,
    XDP_STORE_BYTES => packet::store_bytes,
}

/// One past the highest helper id in [`HELPERS`].
const ID_LIMIT: usize = {
    let mut limit = 0;
    let mut i = 0;
    while i < HELPERS.len() {
        if HELPERS[i].id as usize >= limit {
            limit = HELPERS[i].id as usize + 1;
        }
        i += 1;
    }
    limit
};

/// [`HELPERS`]' position of each id, `u8::MAX` for none: a call is dispatched with one load,
/// not a search of the table (a program calls helpers on every packet).
const POSITION_BY_ID: [u8; ID_LIMIT] = {
    assert!(HELPERS.len() < u8::MAX as usize);
    let mut table = [u8::MAX; ID_LIMIT];
    let mut i = 0;
    while i < HELPERS.len() {
        assert!(HELPERS[i].id >= 0, "helper ids are positive");
        table[HELPERS[i].id as usize] = i as u8;
        i += 1;
    }
    table
};

/// The helper with this id, if bpfemu implements it.
#[inline]
pub fn lookup(id: i32) -> Option<&'static HelperDef> {
    let position = *POSITION_BY_ID.get(usize::try_from(id).ok()?)?;
    HELPERS.get(position as usize)
}

/// What the helpers of one packet's run reach: the maps, the frame, the run's record and the
/// runtime's lasting state.
pub struct XdpEnv<'a> {
    pub maps: &'a mut Maps,
    pub frame: &'a mut XdpFrame,
    pub run: &'a mut RunState,
    pub prandom: &'a mut Prandom,
    pub fib: Option<&'a Fib>,
    /// The sockets the lookups search.
    pub sockets: &'a socket::SocketRegions,
    pub devices: &'a [NetDevice],
    /// Per program: why it could not be prepared (a tail call into it stops the run).
    pub unprepared: &'a [Option<super::prepare::PrepareError>],
    /// The kfuncs the programs call, by BTF id.
    pub kfuncs: &'a [super::kfuncs::ResolvedKfunc],
}

/// What one run records, and its per-run counters.
#[derive(Debug)]
pub struct RunState {
    pub cpu: u32,
    pub clock: Clock,
    /// Tail calls taken so far (the kernel's `tail_call_cnt`).
    pub tail_calls: u32,
    /// The redirect target the last redirect helper set (`bpf_redirect_info`).
    pub redirect: Option<RedirectTarget>,
    pub printk: Vec<String>,
    pub events: Vec<PerfEvent>,
}

impl RunState {
    pub fn new(cpu: u32, clock: Clock) -> RunState {
        RunState {
            cpu,
            clock,
            tail_calls: 0,
            redirect: None,
            printk: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Starts a new run, keeping the buffers of the last one.
    /// Only what the last run left is dropped: most runs print nothing, emit nothing and
    /// redirect nowhere.
    #[inline]
    pub fn reset(&mut self, cpu: u32, clock: Clock) {
        self.cpu = cpu;
        self.clock = clock;
        self.tail_calls = 0;
        if self.redirect.is_some() {
            self.redirect = None;
        }
        if !self.printk.is_empty() {
            self.printk.clear();
        }
        if !self.events.is_empty() {
            self.events.clear();
        }
    }
}

impl Helpers for XdpEnv<'_> {
    fn call(&mut self, id: i32, args: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError> {
        match self.call_outcome(id, args, mem)? {
            HelperOutcome::Return(r0) => Ok(r0),
            other => Err(HelperError::Failed(format!(
                "{other:?} needs the interpreter's call_outcome"
            ))),
        }
    }

    fn call_outcome(&mut self, id: i32, args: [u64; 5], mem: &mut Memory) -> HelperResult {
        // (No error value built before it is needed: dropping one costs a call per helper.)
        let Some(helper) = lookup(id) else {
            return Err(HelperError::Unknown(id));
        };
        (helper.f)(self, args, mem)
    }

    /// Every map's lookup, update, delete and redirect, done as the helpers do them:
    /// declined only where the helper fails (then before any effect).
    fn map_op_direct(&mut self, op: MapOp, a: [u64; 4], mem: &mut Memory) -> Option<u64> {
        let cpu = self.run.cpu;
        match op {
            MapOp::Lookup => self.maps.lookup_elem(mem, a[0], a[1], cpu).ok(),
            MapOp::Update => self.maps.update_elem(mem, a[0], a[1], a[2], a[3], cpu).ok(),
            MapOp::Delete => self.maps.delete_elem(mem, a[0], a[1]).ok(),
            MapOp::Redirect => match redirect::redirect_map(self, [a[0], a[1], a[2], 0, 0], mem) {
                Ok(HelperOutcome::Return(r0)) => Some(r0),
                _ => None,
            },
        }
    }

    fn tail_call_direct(&mut self, prog_array: u64, index: u64) -> TailJump {
        match redirect::tail_call_target(self, prog_array, index) {
            Ok(Some(prog)) => TailJump::Program(prog),
            Ok(None) => TailJump::Fallthrough,
            Err(_) => TailJump::Declined,
        }
    }

    fn call_kfunc(
        &mut self,
        btf_id: i32,
        off: i16,
        args: [u64; 5],
        mem: &mut Memory,
    ) -> Result<u64, HelperError> {
        let Some(kfunc) = super::kfuncs::find(self.kfuncs, btf_id).filter(|_| off == 0) else {
            return Err(HelperError::Unknown(btf_id));
        };
        (kfunc.f)(self, args, mem)
    }

    fn kfunc_name(&self, btf_id: i32, off: i16) -> Option<&'static str> {
        let kfunc = super::kfuncs::find(self.kfuncs, btf_id).filter(|_| off == 0)?;
        Some(kfunc.name)
    }

    fn kfunc_footprint(&self, btf_id: i32, off: i16, args: [u64; 5], _mem: &Memory) -> Footprint {
        match super::kfuncs::find(self.kfuncs, btf_id).filter(|_| off == 0) {
            Some(kfunc) => (kfunc.footprint)(args),
            None => Footprint::Unknown,
        }
    }

    fn cpu(&self) -> Option<u32> {
        Some(self.run.cpu)
    }

    /// The records of a repeated run are the last run's, as those of any run; the CPU and
    /// the clock stay (the same packet, run again at once).
    fn next_run(&mut self) {
        self.run.reset(self.run.cpu, self.run.clock);
    }

    fn footprint(&self, id: i32, a: [u64; 5], mem: &Memory) -> Footprint {
        let map = |handle: u64| {
            let index = self.maps.index_of_handle(handle)?;
            let m = self.maps.get(index)?;
            Some((index, m.key_size(), m.value_size()))
        };
        let packet = || {
            mem.packet()
                .map(|p| vec![(p.extent_base(), p.extent_bytes().len())])
                .unwrap_or_default()
        };
        match id {
            1 | 3 => match map(a[0]) {
                Some((map, key_size, _)) if id == 1 => Footprint::MapLookup {
                    map,
                    key: (a[1], key_size),
                },
                Some((map, key_size, _)) => Footprint::MapDelete {
                    map,
                    key: (a[1], key_size),
                },
                None => Footprint::Unknown,
            },
            2 => match map(a[0]) {
                Some((map, key_size, value_size)) => Footprint::MapUpdate {
                    map,
                    key: (a[1], key_size),
                    value: (a[2], value_size),
                },
                None => Footprint::Unknown,
            },
            // Clocks, random numbers, CPU, printing, redirects, locks, ring buffer records,
            // callback loops: the result comes from the arguments (or is a source).
            5 | 6 | 7 | 8 | 23 | 42 | 51 | 93 | 94 | 118 | 125 | 131 | 133 | 134 | 160 | 164
            | 177 | 181 | 208 => Footprint::Args,
            // Socket lookups find nothing whatever the tuple holds; releases return 0.
            id::SK_LOOKUP_TCP | id::SK_LOOKUP_UDP | id::SK_RELEASE | id::SKC_LOOKUP_TCP => {
                Footprint::Args
            }
            12 => Footprint::TailCall,
            // The submitted sample: from its start to the end of its region.
            132 => Footprint::Memory {
                reads: mem
                    .region_at(a[0])
                    .map(|r| vec![(a[0], r.end().saturating_sub(a[0]) as usize)])
                    .unwrap_or_default(),
                writes: Vec::new(),
            },
            25 | 130 => Footprint::Memory {
                reads: vec![(
                    a[if id == 25 { 3 } else { 1 }],
                    a[if id == 25 { 4 } else { 2 }] as usize,
                )],
                writes: Vec::new(),
            },
            28 => Footprint::Memory {
                reads: vec![(a[0], a[1] as usize), (a[2], a[3] as usize)],
                writes: Vec::new(),
            },
            44 | 54 | 65 => Footprint::PacketBounds,
            69 => Footprint::Memory {
                reads: vec![(a[1], a[2] as usize)],
                writes: vec![(a[1], a[2] as usize)],
            },
            163 => Footprint::Memory {
                reads: vec![(a[2], 4)],
                writes: vec![(a[2], 4)],
            },
            165 => Footprint::Memory {
                reads: vec![(a[2], 1), (a[3], a[4] as usize)],
                writes: vec![(a[0], a[1] as usize)],
            },
            188 => Footprint::Memory {
                reads: packet(),
                writes: Vec::new(),
            },
            189 => Footprint::Memory {
                reads: packet(),
                writes: vec![(a[2], a[3] as usize)],
            },
            190 => Footprint::Memory {
                reads: vec![(a[2], a[3] as usize)],
                writes: packet(),
            },
            _ => Footprint::Unknown,
        }
    }

    fn value_addr(&self, map: usize, key: &[u8], mem: &Memory) -> Option<u64> {
        self.maps.get(map)?.value_addr(mem, key, self.run.cpu)
    }

    fn writable_map_of_handle(&self, handle: u64) -> Option<crate::taint::MapOfHandle> {
        let index = self.maps.index_of_handle(handle)?;
        let spec = self.maps.get(index)?.spec();
        if spec.map_flags & crate::maps::BPF_F_RDONLY_PROG != 0 {
            return None;
        }
        let values = match &spec.global_section {
            Some(section) => crate::memory::RegionKind::Global {
                section: section.clone(),
            },
            None => crate::memory::RegionKind::MapValue {
                map: spec.name.clone(),
            },
        };
        Some(crate::taint::MapOfHandle { index, values })
    }
}

/// A plain r0.
pub(crate) fn ret(value: u64) -> HelperResult {
    Ok(HelperOutcome::Return(value))
}

/// A helper argument that must be a map handle of this run.
pub(crate) fn map_index(maps: &Maps, handle: u64) -> Result<usize, HelperError> {
    maps.index_of_handle(handle)
        .ok_or_else(|| HelperError::Failed(format!("{handle:#x} is not a map")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_every_helper_by_its_id_and_nothing_else() {
        for h in HELPERS {
            assert_eq!(lookup(h.id).map(|found| found.name), Some(h.name));
        }
        let implemented: Vec<i32> = HELPERS.iter().map(|h| h.id).collect();
        for id in [-1, 0, 4, 9, 200, 211, i32::MAX, i32::MIN] {
            assert!(!implemented.contains(&id));
            assert!(lookup(id).is_none(), "{id}");
        }
    }

    #[test]
    fn table_ids_match_the_uapi_names() {
        for h in HELPERS {
            assert_eq!(
                bpfemu_isa::helpers::helper_name(h.id),
                Some(h.name),
                "{}",
                h.id
            );
        }
        let mut ids: Vec<i32> = HELPERS.iter().map(|h| h.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), HELPERS.len());
    }
}
