//! The environment through which a running program reaches helper functions and kfuncs.

use crate::memory::{MemFault, Memory};

/// Helper functions, as the runtime sees them: `call` receives the helper id, r1-r5 and the
/// run's memory, and returns the value for r0.
///
/// The interpreter leaves r1-r5 unchanged after a helper call (the kernel's verifier makes them
/// unreadable, so a verified program cannot tell).
pub trait Helpers {
    fn call(&mut self, id: i32, args: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError>;

    /// Like [`Helpers::call`], for helpers that need more of the interpreter than a value in
    /// r0: a tail call, or callbacks into the program (`bpf_loop`, `bpf_for_each_map_elem`).
    /// The interpreter calls this one; the default answers with [`Helpers::call`].
    fn call_outcome(
        &mut self,
        id: i32,
        args: [u64; 5],
        mem: &mut Memory,
    ) -> Result<HelperOutcome, HelperError> {
        self.call(id, args, mem).map(HelperOutcome::Return)
    }

    /// A map helper as the trusted engines call it, straight from compiled code with its
    /// arguments in registers: r0, or `None` when this environment leaves the call to
    /// [`Helpers::call_outcome`] (which also words what goes wrong). `None` promises that
    /// nothing happened, so that the engine can make the general call instead. The default
    /// declines every call.
    fn map_op_direct(&mut self, op: MapOp, args: [u64; 4], mem: &mut Memory) -> Option<u64> {
        let _ = (op, args, mem);
        None
    }

    /// `bpf_tail_call(ctx, prog_array, index)` as the trusted engines make it: where it goes,
    /// for the engine to jump there itself, as the kernel's JIT does. [`TailJump::Declined`]
    /// promises that nothing happened (the engine then makes the general call, which words
    /// what goes wrong). The default declines.
    fn tail_call_direct(&mut self, prog_array: u64, index: u64) -> TailJump {
        let _ = (prog_array, index);
        TailJump::Declined
    }

    /// Calls the kfunc `btf_id` of module BTF `off` (0: vmlinux) with r1-r5 = `args`;
    /// returns the value for r0. The default knows no kfunc: [`HelperError::Unknown`], which
    /// the engines report as an unsupported instruction.
    fn call_kfunc(
        &mut self,
        btf_id: i32,
        off: i16,
        args: [u64; 5],
        mem: &mut Memory,
    ) -> Result<u64, HelperError> {
        let _ = (off, args, mem);
        Err(HelperError::Unknown(btf_id))
    }

    /// The name of the kfunc `btf_id` of module BTF `off`, when the environment has it.
    fn kfunc_name(&self, _btf_id: i32, _off: i16) -> Option<&'static str> {
        None
    }

    /// For taint tracking: what a call of the kfunc `btf_id` with r1-r5 = `args` reads and
    /// writes (see [`Helpers::footprint`]).
    fn kfunc_footprint(
        &self,
        _btf_id: i32,
        _off: i16,
        _args: [u64; 5],
        _mem: &Memory,
    ) -> crate::taint::Footprint {
        crate::taint::Footprint::Unknown
    }

    /// The virtual CPU this run is on, when the helpers model one: what an engine that
    /// inlines `bpf_get_smp_processor_id` and per-CPU array lookups reads instead of calling.
    fn cpu(&self) -> Option<u32> {
        None
    }

    /// Another run of the same program on the same input begins
    /// ([`Executable::run_entry_repeated`](crate::engine::Executable::run_entry_repeated)):
    /// what the helpers keep for one run (a pending redirect, the tail call count, records)
    /// starts afresh, as for the first.
    fn next_run(&mut self) {}

    /// For taint tracking ([`crate::taint`]): what a call of helper `id` with r1-r5 = `args`
    /// reads and writes. The default knows nothing, which taints control whenever an input
    /// is tainted.
    fn footprint(&self, _id: i32, _args: [u64; 5], _mem: &Memory) -> crate::taint::Footprint {
        crate::taint::Footprint::Unknown
    }

    /// For taint tracking: the address of the value at `key` in map `map` (the running CPU's
    /// copy), found without any side effect (no LRU update).
    fn value_addr(&self, _map: usize, _key: &[u8], _mem: &Memory) -> Option<u64> {
        None
    }

    /// For taint tracking: the map a handle (`BPF_PSEUDO_MAP_FD`'s value) names, when the
    /// program may write it (not `BPF_F_RDONLY_PROG`).
    fn writable_map_of_handle(&self, _handle: u64) -> Option<crate::taint::MapOfHandle> {
        None
    }
}

/// Where a tail call goes ([`Helpers::tail_call_direct`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailJump {
    /// The call returns: an index past the array, an empty slot, or the limit of tail calls
    /// reached (r0 is 0).
    Fallthrough,
    /// Program `n` of the object takes over; the tail call is counted.
    Program(usize),
    /// Left to the general call.
    Declined,
}

/// The map helpers compiled code may call directly ([`Helpers::map_op_direct`]): the calls
/// map-heavy programs make on every packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOp {
    /// `bpf_map_lookup_elem(map, key)`.
    Lookup,
    /// `bpf_map_update_elem(map, key, value, flags)`.
    Update,
    /// `bpf_map_delete_elem(map, key)`.
    Delete,
    /// `bpf_redirect_map(map, key, flags)` (the kernel, too, calls the map's redirect
    /// directly).
    Redirect,
}

impl MapOp {
    /// The direct form of helper `id`, when it has one.
    pub fn of_helper(id: i32) -> Option<MapOp> {
        use bpfemu_isa::helpers::id;
        match id {
            id::MAP_LOOKUP_ELEM => Some(MapOp::Lookup),
            id::MAP_UPDATE_ELEM => Some(MapOp::Update),
            id::MAP_DELETE_ELEM => Some(MapOp::Delete),
            id::REDIRECT_MAP => Some(MapOp::Redirect),
            _ => None,
        }
    }

    /// How many of r1-r4 the operation takes.
    pub fn arity(self) -> usize {
        match self {
            MapOp::Lookup | MapOp::Delete => 2,
            MapOp::Redirect => 3,
            MapOp::Update => 4,
        }
    }
}

/// What a helper asks of the interpreter.
pub enum HelperOutcome {
    /// Set r0 and go on with the next instruction.
    Return(u64),
    /// `bpf_tail_call` succeeded: the running function becomes program `prog` (an index into
    /// the program set the interpreter runs), from its first instruction, with the same
    /// registers and stack frame; its exit returns where the replaced function would have.
    TailCall(usize),
    /// Run program callbacks as the loop decides, then set r0 to its final answer. Helpers
    /// never call back into the interpreter themselves: the interpreter drives the loop, so
    /// callbacks count against the same budget and frame limit as everything else.
    Callbacks(CallbackDriver),
}

/// The loop behind [`HelperOutcome::Callbacks`]: `bpf_loop`'s, the common one, without an
/// allocation per call; any other boxed.
pub enum CallbackDriver {
    Counted(CountedLoop),
    Other(Box<dyn CallbackLoop>),
}

impl CallbackDriver {
    pub fn next(
        &mut self,
        last: Option<u64>,
        mem: &mut Memory,
    ) -> Result<CallbackStep, HelperError> {
        match self {
            CallbackDriver::Counted(counted) => Ok(counted.next(last)),
            CallbackDriver::Other(driver) => driver.next(last, mem),
        }
    }
}

/// `bpf_loop(nr, callback, ctx, 0)`'s loop: the callback with (index, ctx) until it returns
/// nonzero or `nr` calls were made; r0 is the number of calls made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountedLoop {
    nr: u64,
    done: u64,
    callback: u64,
    ctx: u64,
}

impl CountedLoop {
    pub fn new(nr: u64, callback: u64, ctx: u64) -> CountedLoop {
        CountedLoop {
            nr,
            done: 0,
            callback,
            ctx,
        }
    }

    fn next(&mut self, last: Option<u64>) -> CallbackStep {
        if last.is_some_and(|r0| r0 != 0) || self.done == self.nr {
            return CallbackStep::Done(self.done);
        }
        self.done += 1;
        CallbackStep::Call {
            target: self.callback,
            args: [self.done - 1, self.ctx, 0, 0, 0],
        }
    }
}

impl std::fmt::Debug for HelperOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelperOutcome::Return(v) => write!(f, "Return({v:#x})"),
            HelperOutcome::TailCall(p) => write!(f, "TailCall({p})"),
            HelperOutcome::Callbacks(_) => f.write_str("Callbacks(..)"),
        }
    }
}

/// The next thing a callback loop wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackStep {
    /// Call the callback at code address `target` (see [`crate::interp::code_addr`]) with
    /// r1-r5 = `args`, in a fresh stack frame.
    Call { target: u64, args: [u64; 5] },
    /// The helper is done; r0 = this.
    Done(u64),
}

/// A helper that calls back into the program, one callback at a time.
pub trait CallbackLoop {
    /// Called first with `None`, then with each callback's r0.
    fn next(&mut self, last: Option<u64>, mem: &mut Memory) -> Result<CallbackStep, HelperError>;
}

/// Why a helper call failed. The runtime adds the pc and helper id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelperError {
    /// The environment has no helper (or kfunc) with this id.
    #[error("unknown helper {0}")]
    Unknown(i32),
    /// The helper was handed memory the program does not own (boxed: rare, and large).
    #[error(transparent)]
    Memory(Box<MemFault>),
    /// Any other failure, described for the user.
    #[error("{0}")]
    Failed(String),
}

impl From<MemFault> for HelperError {
    fn from(fault: MemFault) -> HelperError {
        HelperError::Memory(Box::new(fault))
    }
}

/// An environment without helpers: every call is [`HelperError::Unknown`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHelpers;

impl Helpers for NoHelpers {
    fn call(&mut self, id: i32, _args: [u64; 5], _mem: &mut Memory) -> Result<u64, HelperError> {
        Err(HelperError::Unknown(id))
    }
}

#[cfg(test)]
mod counted_loop_tests {
    use super::*;

    fn steps(nr: u64, r0s: &[u64]) -> Vec<CallbackStep> {
        let mut lp = CountedLoop::new(nr, 0x1000, 0x2000);
        let mut out = vec![lp.next(None)];
        for &r0 in r0s {
            out.push(lp.next(Some(r0)));
        }
        out
    }

    #[test]
    fn calls_with_the_index_and_ctx_until_nr_or_a_nonzero_return() {
        let call = |i| CallbackStep::Call {
            target: 0x1000,
            args: [i, 0x2000, 0, 0, 0],
        };
        assert_eq!(steps(0, &[]), [CallbackStep::Done(0)]);
        assert_eq!(steps(2, &[0, 0]), [call(0), call(1), CallbackStep::Done(2)]);
        // A callback that returns 1 ends the loop; its call counts.
        assert_eq!(steps(5, &[0, 1]), [call(0), call(1), CallbackStep::Done(2)]);
    }
}
