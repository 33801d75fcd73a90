//! The run-time side of compiled code: the per-run context compiled functions receive, the
//! `extern "C"` entry points they call (memory checks, helpers, frames, errors), and the
//! [`Executable`] that runs them.
//!
//! Every compiled function has the signature `fn(ctx: *mut RunCtx, regs: *mut [u64; 12]) -> u64`:
//! `regs` holds r0-r10 and the frame's `may_goto` count on entry; on a clean exit the function
//! writes r0 back into `regs[0]` and returns [`STATUS_OK`]. Any other status means the run
//! stopped and the error waits in the context; callers return it unchanged.
//!
//! Entry points never keep a Rust reference to the context across a call into compiled code
//! (callbacks re-enter through the same pointer), so each one takes short borrows only.

#[cfg(target_arch = "x86_64")]
use crate::code_memory::CodeMemory;
use crate::plan::{CpuTables, FrameMode};
use bpfemu_isa::{AtomicOp, Program, Reg};
use bpfemu_vm::atomic;
use bpfemu_vm::error::kfunc_error;
use bpfemu_vm::interp::decode_code_addr;
use bpfemu_vm::memory::MemFault;
use bpfemu_vm::{
    CallbackStep, Executable, HelperError, HelperOutcome, Helpers, MAX_CALL_FRAMES, MapOp, Memory,
    RegionId, TailJump, VmError,
};

/// The run goes on.
pub const STATUS_OK: u64 = 0;
/// The run stopped; the error is in `RunCtx::error`.
pub const STATUS_FAIL: u64 = 1;
/// A helper asked for a tail call (the target function in `scratch`), or a legacy packet load
/// missed the packet.
pub const STATUS_SPECIAL: u64 = 2;

/// What a direct map call ([`jit_map_lookup`] and its siblings) returns when the environment
/// declines it, so that the code makes the general helper call: no address (it is not
/// canonical), no map or socket handle, no -errno.
pub const DIRECT_DECLINED: u64 = 0x8000_0000_0000_0000;

/// Slots of the register array compiled functions exchange: r0-r10, `may_goto`'s count, and
/// the top of the function's stack frame (r10 as the runtime made it, whatever the program
/// does to r10: the checked fast path trusts only this one).
pub const REG_SLOTS: usize = Reg::COUNT + 2;
/// Index of the `may_goto` count in the register array.
pub const MAY_GOTO_SLOT: usize = Reg::COUNT;
/// Index of the frame top in the register array.
pub const FRAME_SLOT: usize = Reg::COUNT + 1;

/// A compiled function.
pub type JitFn = unsafe extern "C" fn(*mut RunCtx, *mut u64) -> u64;

/// What compiled code reads and writes directly: the fields with a fixed offset come first.
#[repr(C)]
pub struct RunCtx {
    /// Instructions executed so far (stored by compiled code before every call out).
    pub executed: u64,
    /// The instruction budget.
    pub budget: u64,
    /// Values handed back by entry points (a loaded value, a new r10, a function address).
    pub scratch: u64,
    /// The converted ctx region: `[ctx_base, ctx_base + ctx_len)`.
    pub ctx_base: u64,
    pub ctx_len: u64,
    /// The run's virtual CPU ([`Helpers::cpu`]), `u64::MAX` when the helpers model none.
    pub cpu: u64,
    /// The host address of the converted ctx's field values
    /// ([`bpfemu_vm::CtxSpan::values`]): compiled code reads a ctx field from there.
    pub ctx_values: u64,
    /// The live window `[lo, lo + len)` of the region the last checked read found (not a
    /// converted ctx), and of the writable one the last checked write found: checked code
    /// accesses them inline. `len` 0: none; emptied whenever regions may change.
    pub read_lo: u64,
    pub read_len: u64,
    pub write_lo: u64,
    pub write_len: u64,
    /// Trusted code's call depth (0: the entry function's frame) and the top of each
    /// depth's frame, 0 until the first call at that depth in the batch of runs: trusted
    /// code enters a frame inline (see [`FrameMode::Kept`]).
    pub depth: u64,
    pub frame_tops: [u64; MAX_CALL_FRAMES],
    // Private to the runtime below.
    mem: *mut Memory,
    helpers: *mut dyn Helpers,
    error: Option<VmError>,
    frames: FrameStack,
    /// The frames of [`FrameMode::Kept`], by depth (`frame_tops` holds their tops).
    kept_frames: [Option<RegionId>; MAX_CALL_FRAMES],
    shared: *const Shared,
    /// Each program's entry function, by program index (tail calls jump through it).
    prog_entries: *const [Option<JitFn>],
}

/// The stack frames of the active calls, innermost last: a fixed array in the context, so that
/// a run neither allocates nor moves a vector in and out of it.
struct FrameStack {
    ids: [Option<RegionId>; MAX_CALL_FRAMES],
    len: usize,
}

impl FrameStack {
    fn new() -> FrameStack {
        FrameStack {
            ids: [None; MAX_CALL_FRAMES],
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Adds a frame; the caller checks the depth first.
    fn push(&mut self, id: RegionId) {
        self.ids[self.len] = Some(id);
        self.len += 1;
    }

    fn pop(&mut self) -> Option<RegionId> {
        self.len = self.len.checked_sub(1)?;
        self.ids[self.len].take()
    }
}

/// Field offsets compiled code uses.
pub mod offsets {
    pub const EXECUTED: i32 = 0;
    pub const BUDGET: i32 = 8;
    pub const SCRATCH: i32 = 16;
    pub const CTX_BASE: i32 = 24;
    pub const CTX_LEN: i32 = 32;
    pub const CPU: i32 = 40;
    pub const CTX_VALUES: i32 = 48;
    pub const READ_LO: i32 = 56;
    pub const READ_LEN: i32 = 64;
    pub const WRITE_LO: i32 = 72;
    pub const WRITE_LEN: i32 = 80;
    pub const DEPTH: i32 = 88;
    pub const FRAME_TOPS: i32 = 96;
}

const _: () = {
    assert!(std::mem::offset_of!(RunCtx, executed) == offsets::EXECUTED as usize);
    assert!(std::mem::offset_of!(RunCtx, budget) == offsets::BUDGET as usize);
    assert!(std::mem::offset_of!(RunCtx, scratch) == offsets::SCRATCH as usize);
    assert!(std::mem::offset_of!(RunCtx, ctx_base) == offsets::CTX_BASE as usize);
    assert!(std::mem::offset_of!(RunCtx, ctx_len) == offsets::CTX_LEN as usize);
    assert!(std::mem::offset_of!(RunCtx, cpu) == offsets::CPU as usize);
    assert!(std::mem::offset_of!(RunCtx, ctx_values) == offsets::CTX_VALUES as usize);
    assert!(std::mem::offset_of!(RunCtx, read_lo) == offsets::READ_LO as usize);
    assert!(std::mem::offset_of!(RunCtx, read_len) == offsets::READ_LEN as usize);
    assert!(std::mem::offset_of!(RunCtx, write_lo) == offsets::WRITE_LO as usize);
    assert!(std::mem::offset_of!(RunCtx, write_len) == offsets::WRITE_LEN as usize);
    assert!(std::mem::offset_of!(RunCtx, depth) == offsets::DEPTH as usize);
    assert!(std::mem::offset_of!(RunCtx, frame_tops) == offsets::FRAME_TOPS as usize);
};

impl RunCtx {
    /// Forgets the regions checked code reaches inline: called wherever regions may change.
    #[inline]
    fn forget_regions(&mut self) {
        self.read_len = 0;
        self.write_len = 0;
    }

    /// Notes the live window of the region holding `addr` for checked code's inline reads
    /// (and writes, for `write`).
    #[inline]
    fn remember_region(&mut self, mem: &Memory, addr: u64, write: bool) {
        if let Some(region) = mem.region_at(addr)
            && region.ctx_fields().is_none()
        {
            (self.read_lo, self.read_len) = (region.base(), region.len() as u64);
            if write {
                (self.write_lo, self.write_len) = (region.base(), region.len() as u64);
            }
        }
    }
}

/// What every run of one compiled program set shares.
pub struct Shared {
    pub programs: Vec<Program>,
    /// Function entries by (program, insn), sorted: found by binary search (a callback's
    /// entry is looked up at each helper call that runs callbacks).
    pub entries: Vec<((usize, usize), JitFn)>,
    /// Errors known at compile time (a jump out of the program, an unsupported instruction),
    /// raised by index.
    pub static_errors: Vec<VmError>,
    pub may_goto_loops: u64,
    /// The lowest byte of a stack frame (0 for the frame's bottom, `STACK_SIZE` for none) that
    /// compiled code may store to directly: frames are zeroed from there when they come back,
    /// as the interpreter zeroes what it wrote (a program may read uninitialised stack, and
    /// both engines must see zeros).
    pub stack_written_from: usize,
    /// Tables the inlined per-CPU array lookups read.
    pub cpu_tables: CpuTables,
    pub frame_mode: FrameMode,
}

impl Shared {
    /// The compiled function that starts at `(program, insn)`.
    pub fn entry(&self, key: (usize, usize)) -> Option<JitFn> {
        let at = self.entries.binary_search_by_key(&key, |(k, _)| *k).ok()?;
        Some(self.entries[at].1)
    }
}

/// Packs the pc and the length of an access into the one argument [`jit_read`] and
/// [`jit_write_check`] take (fewer constants at each of the many call sites).
pub const fn pack_access(pc: usize, len: usize) -> u64 {
    ((pc as u64) << 4) | len as u64
}

fn unpack_access(pc_len: u64) -> (usize, usize) {
    ((pc_len >> 4) as usize, (pc_len & 0xf) as usize)
}

/// Reads `len` bytes at `addr` (plain memory, or a converted ctx field's value) into
/// `scratch`, checked against the live regions: [`STATUS_OK`] or the fault.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_read(ctx: *mut RunCtx, addr: u64, pc_len: u64) -> u64 {
    // SAFETY: the caller passes the live context; `mem` outlives the run.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as above.
    let mem = unsafe { &*ctx.mem };
    let (pc, len) = unpack_access(pc_len);
    match mem.read(addr, len) {
        Ok(value) => {
            ctx.scratch = value;
            ctx.remember_region(mem, addr, false);
            STATUS_OK
        }
        Err(fault) => fail_mem(ctx, pc as u64, fault),
    }
}

/// Validates `[addr, addr + len)` for a write: [`STATUS_OK`] or the fault.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_write_check(ctx: *mut RunCtx, addr: u64, pc_len: u64) -> u64 {
    // SAFETY: the caller passes the live context; `mem` outlives the run.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as above.
    let mem = unsafe { &mut *ctx.mem };
    let (pc, len) = unpack_access(pc_len);
    match mem.slice_mut(addr, len) {
        Ok(_) => {
            ctx.remember_region(mem, addr, true);
            STATUS_OK
        }
        Err(fault) => fail_mem(ctx, pc as u64, fault),
    }
}

fn fail_mem(ctx: &mut RunCtx, pc: u64, fault: MemFault) -> u64 {
    ctx.error = Some(VmError::Memory {
        pc: pc as usize,
        fault: Box::new(fault),
    });
    STATUS_FAIL
}

/// Packs an atomic operation and its size in bytes into the one argument
/// [`jit_atomic_unaligned`] takes.
pub const fn pack_atomic(op: AtomicOp, bytes: usize) -> u64 {
    ((op.imm() as u32 as u64) << 8) | bytes as u64
}

/// An atomic read-modify-write at an address that is not aligned to its size: the hardware's
/// locked instructions would split the bus lock, so it is done by the interpreter's own
/// [`atomic::update`] (no other thread runs the program). The old value goes to `scratch`.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_atomic_unaligned(
    ctx: *mut RunCtx,
    addr: u64,
    op_size: u64,
    operand: u64,
    expected: u64,
    pc: u64,
) -> u64 {
    // SAFETY: the caller passes the live context; `mem` outlives the run.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as above.
    let mem = unsafe { &mut *ctx.mem };
    let n = (op_size & 0xff) as usize;
    let op = AtomicOp::from_imm((op_size >> 8) as i32).unwrap_or(AtomicOp::Add);
    let slot = match mem.slice_mut(addr, n) {
        Ok(slot) => slot,
        Err(fault) => return fail_mem(ctx, pc, fault),
    };
    ctx.scratch = atomic::update(slot, op, operand, expected);
    STATUS_OK
}

/// Adds the stack frame of a call from `pc` to `target`; its r10 goes to `scratch`.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_push_frame(ctx: *mut RunCtx, pc: u64, target: u64) -> u64 {
    // SAFETY: the caller passes the live context.
    let ctx = unsafe { &mut *ctx };
    match push_frame(ctx, pc as usize, target as usize) {
        Ok(()) => STATUS_OK,
        Err(e) => {
            ctx.error = Some(e);
            STATUS_FAIL
        }
    }
}

fn push_frame(ctx: &mut RunCtx, pc: usize, target: usize) -> Result<(), VmError> {
    // SAFETY: `shared` outlives the compiled code.
    if unsafe { &*ctx.shared }.frame_mode == FrameMode::Kept {
        return enter_kept_frame(ctx, pc, target);
    }
    if ctx.frames.len() == MAX_CALL_FRAMES {
        return Err(VmError::CallDepthExceeded { pc, target });
    }
    // SAFETY: `mem` outlives the run.
    let mem = unsafe { &mut *ctx.mem };
    ctx.forget_regions();
    let (id, top) = mem.push_stack_frame(ctx.frames.len());
    ctx.frames.push(id);
    ctx.scratch = top;
    Ok(())
}

/// [`FrameMode::Kept`]'s call: one depth deeper, into that depth's frame (added to the
/// memory at its first call of the batch), zeroed where code or helpers may have written.
/// Trusted code comes here only when the frame is not there yet or its zeroing is too long
/// to inline; callbacks always.
fn enter_kept_frame(ctx: &mut RunCtx, pc: usize, target: usize) -> Result<(), VmError> {
    let depth = ctx.depth as usize + 1;
    if depth >= MAX_CALL_FRAMES {
        return Err(VmError::CallDepthExceeded { pc, target });
    }
    // SAFETY: `mem` outlives the run, `shared` the compiled code.
    let (mem, shared) = unsafe { (&mut *ctx.mem, &*ctx.shared) };
    let top = match ctx.kept_frames[depth] {
        Some(id) => {
            mem.clean_stack_frame(id, shared.stack_written_from);
            ctx.frame_tops[depth]
        }
        None => {
            let (id, top) = mem.push_stack_frame(depth);
            ctx.kept_frames[depth] = Some(id);
            ctx.frame_tops[depth] = top;
            top
        }
    };
    ctx.forget_regions();
    ctx.depth = depth as u64;
    ctx.scratch = top;
    Ok(())
}

/// Ends the batch's kept frames ([`FrameMode::Kept`]): each goes back to the memory, which
/// zeroes what was written in it when it comes back.
fn release_kept_frames(ctx: &mut RunCtx, shared: &Shared) {
    // SAFETY: `mem` outlives the run.
    let mem = unsafe { &mut *ctx.mem };
    for depth in 1..MAX_CALL_FRAMES {
        if let Some(id) = ctx.kept_frames[depth].take() {
            park_frame(mem, id, shared.stack_written_from);
            ctx.frame_tops[depth] = 0;
        }
    }
    ctx.depth = 0;
}

/// Gives stack frame `id` back to the memory, telling it that compiled code may have
/// written the frame from byte `written_from` up (zeroed there when the frame comes back).
fn park_frame(mem: &mut Memory, id: RegionId, written_from: usize) {
    if written_from < bpfemu_vm::STACK_SIZE {
        mem.note_stack_written(id, written_from);
    }
    mem.remove_stack_frame(id);
}

/// Removes the innermost stack frame, when a call returns.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_pop_frame(ctx: *mut RunCtx) {
    // SAFETY: the caller passes the live context.
    let ctx = unsafe { &mut *ctx };
    pop_frame(ctx);
}

fn pop_frame(ctx: &mut RunCtx) {
    ctx.forget_regions();
    // SAFETY: `shared` outlives the compiled code.
    if unsafe { &*ctx.shared }.frame_mode == FrameMode::Kept {
        ctx.depth = ctx.depth.saturating_sub(1);
        return;
    }
    if let Some(id) = ctx.frames.pop() {
        // SAFETY: `mem` outlives the run, `shared` the compiled code.
        let (mem, shared) = unsafe { (&mut *ctx.mem, &*ctx.shared) };
        park_frame(mem, id, shared.stack_written_from);
    }
}

/// Raises the compile-time error number `index`.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_fail(ctx: *mut RunCtx, index: u64) -> u64 {
    // SAFETY: the caller passes the live context; `shared` outlives the run.
    let ctx = unsafe { &mut *ctx };
    let shared = unsafe { &*ctx.shared };
    ctx.error = Some(shared.static_errors[index as usize].clone());
    STATUS_FAIL
}

/// The budget ran out in the block that starts at `start` of program `prog`: `executed` holds
/// the count before the block. Names the first instruction that did not run, as the
/// interpreter does.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_budget_exhausted(ctx: *mut RunCtx, prog: u64, start: u64) -> u64 {
    // SAFETY: the caller passes the live context; `shared` outlives the run.
    let ctx = unsafe { &mut *ctx };
    let shared = unsafe { &*ctx.shared };
    let program = &shared.programs[prog as usize];
    let mut pc = start as usize;
    for _ in ctx.executed..ctx.budget {
        pc += program.insn(pc).map_or(1, |i| i.slots());
    }
    ctx.executed = ctx.budget;
    ctx.error = Some(VmError::BudgetExceeded {
        pc,
        budget: ctx.budget,
    });
    STATUS_FAIL
}

/// LD_ABS / LD_IND at packet offset `offset` (the kernel passes it as an `int`): the value,
/// read in network order, goes to `scratch`; [`STATUS_SPECIAL`] when the load misses the packet
/// (r0 = 0 and the function exits).
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_legacy_load(ctx: *mut RunCtx, offset: u64, len: u64, pc: u64) -> u64 {
    // SAFETY: the caller passes the live context; `mem` outlives the run.
    let ctx = unsafe { &mut *ctx };
    let mem = unsafe { &*ctx.mem };
    let Some(packet) = mem.packet() else {
        ctx.error = Some(VmError::NoPacket { pc: pc as usize });
        return STATUS_FAIL;
    };
    let value = usize::try_from(offset as i32)
        .ok()
        .and_then(|start| packet.bytes().get(start..start.checked_add(len as usize)?))
        .map(|bytes| bytes.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64));
    match value {
        Some(value) => {
            ctx.scratch = value;
            STATUS_OK
        }
        None => STATUS_SPECIAL,
    }
}

/// r1-r5 of a call, from the register array compiled code has just filled with one 8-byte
/// store per register. Read back one 8-byte load per register: the compiler merged the copy
/// into 16-byte loads, each of which waited for the two stores it spans (a store-forwarding
/// stall that was 85% of a helper call's time in the runtime).
///
/// # Safety
/// `regs` points at 12 slots.
#[inline(always)]
unsafe fn call_args(regs: *const u64) -> [u64; 5] {
    // SAFETY: slots 1-5 are inside the caller's array; volatile keeps the loads 8 bytes wide.
    unsafe { std::array::from_fn(|i| regs.add(i + 1).read_volatile()) }
}

/// Calls helper `id` with r1-r5 from `regs[1..6]`. [`STATUS_OK`]: r0 in `scratch`;
/// [`STATUS_SPECIAL`]: a tail call, the target's entry in `scratch`. Callback loops run here,
/// calling compiled callbacks, each in a frame of its own.
///
/// # Safety
/// `ctx` is the live context of the running program and `regs` points at 12 slots.
pub unsafe extern "C" fn jit_helper(ctx: *mut RunCtx, id: u64, regs: *const u64, pc: u64) -> u64 {
    let id = id as i32;
    let pc = pc as usize;
    // SAFETY: the caller's register array has 12 slots.
    let args = unsafe { call_args(regs) };
    // SAFETY: the caller passes the live context; the borrow ends before any callback runs.
    let outcome = {
        let c = unsafe { &mut *ctx };
        // SAFETY: `helpers` and `mem` outlive the run; nothing else borrows them now.
        let (helpers, mem) = unsafe { (&mut *c.helpers, &mut *c.mem) };
        helpers.call_outcome(id, args, mem)
    };
    let result = match outcome {
        Ok(HelperOutcome::Return(r0)) => Ok(r0),
        Ok(HelperOutcome::TailCall(prog)) => {
            // SAFETY: as above.
            let c = unsafe { &mut *ctx };
            let entries = unsafe { &*c.prog_entries };
            match entries.get(prog).copied().flatten() {
                Some(entry) => {
                    c.forget_regions();
                    c.scratch = entry as usize as u64;
                    return STATUS_SPECIAL;
                }
                None => Err(helper_error(
                    pc,
                    id,
                    HelperError::Failed(format!(
                        "tail call to program {prog}, which is not loaded"
                    )),
                )),
            }
        }
        // SAFETY: `ctx` is live.
        Ok(HelperOutcome::Callbacks(driver)) => unsafe { run_callbacks(ctx, driver, id, pc) },
        Err(e) => Err(helper_error(pc, id, e)),
    };
    // SAFETY: as above.
    let c = unsafe { &mut *ctx };
    // The helper (or a callback) may have moved, added or removed regions.
    c.forget_regions();
    match result {
        Ok(r0) => {
            c.scratch = r0;
            STATUS_OK
        }
        Err(e) => {
            if c.error.is_none() {
                c.error = Some(e);
            }
            STATUS_FAIL
        }
    }
}

/// `bpf_map_lookup_elem(map, key)` called directly by trusted code: r0, or
/// [`DIRECT_DECLINED`]. No status, no register array, no scratch: the call trusted code
/// makes for most packets, as the kernel calls its map's lookup.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_map_lookup(ctx: *mut RunCtx, map: u64, key: u64) -> u64 {
    // SAFETY: the caller passes the live context.
    unsafe { map_op_direct(ctx, MapOp::Lookup, [map, key, 0, 0]) }
}

/// `bpf_map_update_elem(map, key, value, flags)` called directly, as [`jit_map_lookup`].
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_map_update(
    ctx: *mut RunCtx,
    map: u64,
    key: u64,
    value: u64,
    flags: u64,
) -> u64 {
    // SAFETY: the caller passes the live context.
    unsafe { map_op_direct(ctx, MapOp::Update, [map, key, value, flags]) }
}

/// `bpf_map_delete_elem(map, key)` called directly, as [`jit_map_lookup`].
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_map_delete(ctx: *mut RunCtx, map: u64, key: u64) -> u64 {
    // SAFETY: the caller passes the live context.
    unsafe { map_op_direct(ctx, MapOp::Delete, [map, key, 0, 0]) }
}

/// `bpf_redirect_map(map, key, flags)` called directly, as [`jit_map_lookup`].
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_map_redirect(ctx: *mut RunCtx, map: u64, key: u64, flags: u64) -> u64 {
    // SAFETY: the caller passes the live context.
    unsafe { map_op_direct(ctx, MapOp::Redirect, [map, key, flags, 0]) }
}

/// # Safety
/// `ctx` is the live context of the running program.
#[inline(always)]
unsafe fn map_op_direct(ctx: *mut RunCtx, op: MapOp, args: [u64; 4]) -> u64 {
    // SAFETY: the caller passes the live context; `helpers` and `mem` outlive the run and
    // nothing else borrows them while compiled code calls out. (Only trusted code calls
    // here, which keeps no region window to forget.)
    let c = unsafe { &mut *ctx };
    let (helpers, mem) = unsafe { (&mut *c.helpers, &mut *c.mem) };
    helpers
        .map_op_direct(op, args, mem)
        .unwrap_or(DIRECT_DECLINED)
}

/// `bpf_tail_call(ctx, prog_array, index)` called directly by trusted code: the entry of the
/// program it goes to (compiled code jumps there itself, as the kernel's JIT does), 0 when it
/// falls through, or [`DIRECT_DECLINED`] for the general call.
///
/// # Safety
/// `ctx` is the live context of the running program.
pub unsafe extern "C" fn jit_tail_call(ctx: *mut RunCtx, prog_array: u64, index: u64) -> u64 {
    // SAFETY: the caller passes the live context; `helpers` and `prog_entries` outlive the
    // run and nothing else borrows them while compiled code calls out.
    let c = unsafe { &mut *ctx };
    let (helpers, entries) = unsafe { (&mut *c.helpers, &*c.prog_entries) };
    match helpers.tail_call_direct(prog_array, index) {
        TailJump::Fallthrough => 0,
        // A program without compiled code is the general call's to refuse.
        TailJump::Program(prog) => entries
            .get(prog)
            .copied()
            .flatten()
            .map_or(DIRECT_DECLINED, |entry| entry as usize as u64),
        TailJump::Declined => DIRECT_DECLINED,
    }
}

/// The runtime entry trusted code calls directly for map operation `op`.
pub fn map_op_entry(op: MapOp) -> usize {
    match op {
        MapOp::Lookup => jit_map_lookup as *const () as usize,
        MapOp::Update => jit_map_update as *const () as usize,
        MapOp::Delete => jit_map_delete as *const () as usize,
        MapOp::Redirect => jit_map_redirect as *const () as usize,
    }
}

/// Packs a kfunc's BTF id and module BTF into the one argument [`jit_kfunc`] takes.
pub const fn pack_kfunc(btf_id: i32, off: i16) -> u64 {
    ((off as u16 as u64) << 32) | btf_id as u32 as u64
}

/// Calls the kfunc packed in `kfunc` ([`pack_kfunc`]) with r1-r5 from `regs[1..6]`:
/// [`STATUS_OK`] with r0 in `scratch`, or the error.
///
/// # Safety
/// `ctx` is the live context of the running program and `regs` points at 12 slots.
pub unsafe extern "C" fn jit_kfunc(ctx: *mut RunCtx, kfunc: u64, regs: *const u64, pc: u64) -> u64 {
    let (btf_id, off) = (kfunc as u32 as i32, (kfunc >> 32) as u16 as i16);
    // SAFETY: the caller's register array has 12 slots.
    let args = unsafe { call_args(regs) };
    // SAFETY: the caller passes the live context; kfuncs do not call back into the program.
    let c = unsafe { &mut *ctx };
    // SAFETY: `helpers` and `mem` outlive the run; nothing else borrows them now.
    let (helpers, mem) = unsafe { (&mut *c.helpers, &mut *c.mem) };
    c.forget_regions();
    match helpers.call_kfunc(btf_id, off, args, mem) {
        Ok(r0) => {
            c.scratch = r0;
            STATUS_OK
        }
        Err(e) => {
            c.error = Some(kfunc_error(pc as usize, btf_id, off, helpers, e));
            STATUS_FAIL
        }
    }
}

/// A marker error: a callback stopped the run and its error is already in the context.
fn callback_failed() -> VmError {
    VmError::FellOffEnd { pc: usize::MAX }
}

/// Drives a helper's callback loop as the interpreter does: each callback runs in a fresh
/// frame with r1-r5 from the loop and zero elsewhere.
///
/// # Safety
/// `ctx` is the live context of the running program.
unsafe fn run_callbacks(
    ctx: *mut RunCtx,
    mut driver: bpfemu_vm::CallbackDriver,
    id: i32,
    pc: usize,
) -> Result<u64, VmError> {
    let mut last = None;
    // A loop calls the same callback each time: found in the entry table once.
    let mut known: Option<(u64, (usize, JitFn))> = None;
    loop {
        let step = {
            // SAFETY: short borrows of the live context and its memory.
            let c = unsafe { &mut *ctx };
            driver
                .next(last, unsafe { &mut *c.mem })
                .map_err(|e| helper_error(pc, id, e))?
        };
        let (target, args) = match step {
            CallbackStep::Done(r0) => return Ok(r0),
            CallbackStep::Call { target, args } => (target, args),
        };
        let entry = {
            // SAFETY: as above.
            let c = unsafe { &mut *ctx };
            let shared = unsafe { &*c.shared };
            let entry = known
                .filter(|(addr, _)| *addr == target)
                .map(|(_, entry)| entry)
                .or_else(|| {
                    decode_code_addr(target).and_then(|key| shared.entry(key).map(|f| (key.1, f)))
                })
                .ok_or_else(|| {
                    helper_error(
                        pc,
                        id,
                        HelperError::Failed(format!("callback {target:#x} is not a function")),
                    )
                })?;
            known = Some((target, entry));
            push_frame(c, pc, entry.0)?;
            entry.1
        };
        // SAFETY: as above.
        let (r10, loops) = {
            let c = unsafe { &*ctx };
            (c.scratch, unsafe { &*c.shared }.may_goto_loops)
        };
        let mut regs = [0u64; REG_SLOTS];
        regs[1..6].copy_from_slice(&args);
        regs[Reg::R10.index()] = r10;
        regs[FRAME_SLOT] = r10;
        regs[MAY_GOTO_SLOT] = loops;
        // SAFETY: `entry` is a function of this program set, compiled with the JitFn
        // signature; the register array has 12 slots.
        let status = unsafe { entry(ctx, regs.as_mut_ptr()) };
        if status != STATUS_OK {
            return Err(callback_failed());
        }
        // SAFETY: as above.
        pop_frame(unsafe { &mut *ctx });
        last = Some(regs[0]);
    }
}

fn helper_error(pc: usize, id: i32, e: HelperError) -> VmError {
    match e {
        HelperError::Unknown(_) => VmError::UnknownHelper { pc, id },
        source => VmError::Helper { pc, id, source },
    }
}

/// Who owns a program set's code memory: Cranelift's module, or the baseline tier's pages
/// (unmapped when dropped).
pub enum Code {
    Cranelift(Box<cranelift_jit::JITModule>),
    #[cfg(target_arch = "x86_64")]
    Native(CodeMemory),
}

/// The native code of one program set, with its shared tables. Dropping it frees the code.
pub struct Compiled {
    pub(crate) module: Option<Code>,
    /// Boxed: the kept context points at it.
    pub(crate) shared: Box<Shared>,
    pub(crate) executed: u64,
    /// The run context, built once and kept from run to run: a run only sets what changes
    /// (the memory, the helpers, the ctx region, the CPU). Its entry table and shared tables
    /// point into `entries` and `shared`, which live as long.
    pub(crate) ctx: Box<RunCtx>,
    /// Each program's entry function, by program index (what `ctx.prog_entries` points at).
    pub(crate) entries: Box<[Option<JitFn>]>,
    /// Whether the frames of a run stay live in the memory for the next run
    /// ([`Executable::keep_frames`]).
    pub(crate) keep_frames: bool,
    /// The entry frame (its id and top) the last run left live, with [`Compiled::keep_frames`].
    pub(crate) kept_entry: Option<(RegionId, u64)>,
}

impl Compiled {
    pub(crate) fn new(module: Code, shared: Shared, budget: u64) -> Compiled {
        let shared = Box::new(shared);
        let entries: Box<[Option<JitFn>]> = (0..shared.programs.len())
            .map(|prog| shared.entry((prog, 0)))
            .collect();
        let ctx = Box::new(RunCtx {
            executed: 0,
            budget,
            scratch: 0,
            ctx_base: 0,
            ctx_len: 0,
            cpu: u64::MAX,
            ctx_values: 0,
            read_lo: 0,
            read_len: 0,
            write_lo: 0,
            write_len: 0,
            depth: 0,
            frame_tops: [0; MAX_CALL_FRAMES],
            mem: std::ptr::null_mut(),
            helpers: std::ptr::null_mut::<bpfemu_vm::NoHelpers>() as *mut dyn Helpers,
            error: None,
            frames: FrameStack::new(),
            kept_frames: [None; MAX_CALL_FRAMES],
            shared: &*shared,
            prog_entries: &*entries,
        });
        Compiled {
            module: Some(module),
            shared,
            executed: 0,
            ctx,
            entries,
            keep_frames: false,
            kept_entry: None,
        }
    }
}

impl Drop for Compiled {
    fn drop(&mut self) {
        // The baseline tier's pages unmap themselves when dropped.
        if let Some(Code::Cranelift(module)) = self.module.take() {
            // SAFETY: no compiled function runs (runs borrow `self` mutably) and the entry
            // table that points into the code is dropped with `self`.
            unsafe { module.free_memory() };
        }
    }
}

/// One run of `function` with the context set up, in the entry frame whose top is `top`: the
/// count from zero, then the frames a stopped run left above the entry's popped. Gives r0, or
/// `None` when the run stopped (its error is then in `ctx.error`).
fn run_once(
    ctx: &mut RunCtx,
    shared: &Shared,
    function: JitFn,
    args: [u64; 5],
    top: u64,
) -> Option<u64> {
    ctx.executed = 0;
    ctx.depth = 0;
    ctx.forget_regions();
    let mut regs = [0u64; REG_SLOTS];
    regs[1..6].copy_from_slice(&args);
    regs[Reg::R10.index()] = top;
    regs[FRAME_SLOT] = top;
    regs[MAY_GOTO_SLOT] = shared.may_goto_loops;
    // SAFETY: `function` was compiled with the JitFn signature for this program set; the
    // context and the register array live across the call.
    let status = unsafe { function(ctx, regs.as_mut_ptr()) };
    while ctx.frames.len() > 1 {
        pop_frame(ctx);
    }
    (status == STATUS_OK).then_some(regs[0])
}

impl Executable for Compiled {
    fn run(
        &mut self,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.run_entry_repeated(0, args, mem, helpers, 1)
    }

    fn run_entry(
        &mut self,
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.run_entry_repeated(entry, args, mem, helpers, 1)
    }

    /// The context is set up once for all the runs; each run gets the entry frame zeroed
    /// where the last one wrote, its own count, and the helpers' per-run state afresh.
    fn run_entry_repeated(
        &mut self,
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
        times: u64,
    ) -> Result<u64, VmError> {
        // (No error value is built and dropped on the way in: the entry is nearly always there.)
        let Some(function) = self.entries.get(entry).copied().flatten() else {
            return Err(VmError::FellOffEnd { pc: 0 });
        };
        let ctx = &mut *self.ctx;
        (ctx.ctx_base, ctx.ctx_len, ctx.ctx_values) = match mem.converted_ctx_span() {
            Some(span) => (span.base, span.len, span.values),
            None => (0, 0, 0),
        };
        ctx.cpu = helpers.cpu().map_or(u64::MAX, u64::from);
        ctx.mem = mem;
        let helpers: *mut (dyn Helpers + '_) = helpers;
        // SAFETY: the pointer is only used during this call, while the borrow lives (it is
        // left dangling in the kept context after, never read before the next run sets it);
        // the lifetime is erased to store it in the context.
        ctx.helpers = unsafe {
            std::mem::transmute::<*mut (dyn Helpers + '_), *mut (dyn Helpers + 'static)>(helpers)
        };
        let written_from = self.shared.stack_written_from;
        // The entry frame is the same for every run of the batch: zeroed where the last run
        // wrote, as a parked frame brought back would be. The one the last batch left live
        // (keep_frames) is cleaned in place: the same bytes as parking it then bringing it
        // back, without the two changes to the memory's regions on every packet.
        // SAFETY: the memory is the caller's, borrowed for this call; compiled code reaches it
        // only through the context, and does not run now.
        let stack_mem = unsafe { &mut *ctx.mem };
        let (stack, top) = match self.kept_entry.take() {
            Some((id, top)) if stack_mem.clean_stack_frame_at(0, id, written_from) => (id, top),
            _ => stack_mem.push_stack_frame(0),
        };
        ctx.frames.push(stack);
        let mut total = 0;
        let mut r0 = Some(0);
        for run in 0..times.max(1) {
            if run > 0 {
                // SAFETY: as above; the helpers outlive this call.
                unsafe {
                    (*ctx.helpers).next_run();
                    (*ctx.mem).clean_stack_frame(stack, written_from);
                }
            }
            r0 = run_once(ctx, &self.shared, function, args, top);
            total += ctx.executed;
            if r0.is_none() {
                break;
            }
        }
        ctx.frames.pop();
        if self.keep_frames {
            // Left live for the next run, which cleans them where this one wrote
            // (release_frames parks them otherwise).
            self.kept_entry = Some((stack, top));
        } else {
            release_kept_frames(ctx, &self.shared);
            // SAFETY: as above.
            park_frame(unsafe { &mut *ctx.mem }, stack, written_from);
        }
        self.executed = total;
        // The result is built here, where it is returned: a whole `Result` kept across the
        // loop and the clean-up was copied out with wide loads over the narrow stores that
        // had just built it (a store-forwarding stall on every packet, a fifth of this
        // function's time in a fast replay).
        match r0 {
            Some(r0) => Ok(r0),
            None => Err(self
                .ctx
                .error
                .take()
                .unwrap_or(VmError::FellOffEnd { pc: 0 })),
        }
    }

    fn keep_frames(&mut self) {
        self.keep_frames = true;
    }

    fn release_frames(&mut self, mem: &mut Memory) {
        let written_from = self.shared.stack_written_from;
        if let Some((stack, _)) = self.kept_entry.take() {
            park_frame(mem, stack, written_from);
        }
        let ctx = &mut *self.ctx;
        ctx.mem = mem;
        release_kept_frames(ctx, &self.shared);
    }

    fn executed(&self) -> u64 {
        self.executed
    }

    fn set_executed(&mut self, count: u64) {
        self.executed = count;
    }
}
