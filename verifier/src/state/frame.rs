//! Call frames (`struct bpf_func_state`), acquired references (`struct bpf_reference_state`)
//! and the whole verifier state of one path (`struct bpf_verifier_state`).

use super::reg::RegState;
use super::stack::{SLOT_SIZE, StackSlot};
use bpfemu_isa::Reg;

/// The most frames a call chain holds in any kernel bpfemu answers as (7.2's
/// `MAX_CALL_FRAMES`): what per-frame arrays are sized by. The limit of one kernel is
/// [`crate::behaviour::max_call_frames`].
pub const MAX_CALL_FRAMES: usize = 16;

/// The callsite of the main program's frame (`BPF_MAIN_FUNC`, -1 as the kernel stores it).
pub const BPF_MAIN_FUNC: usize = u32::MAX as usize;

/// What an acquired reference is (`enum ref_state_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// An object pointer that must be released (ring buffer record, ...).
    Ptr,
    /// A held `bpf_spin_lock`.
    Lock,
    /// `bpf_rcu_read_lock` section.
    Rcu,
    /// Saved irq flags.
    Irq,
}

/// One acquired reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefState {
    pub kind: RefKind,
    pub id: u32,
    /// The instruction that acquired it (named in "Unreleased reference id=N alloc_insn=M").
    pub insn_idx: usize,
    /// For a lock: the map whose value holds it (the kernel's `ptr`, a `struct bpf_map *`);
    /// 0 for other kinds.
    pub ptr: u32,
}

/// One call frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncState {
    pub regs: [RegState; Reg::COUNT],
    /// Slot `i` covers `fp-8*(i+1)` to `fp-8*i-1`.
    pub stack: Vec<StackSlot>,
    /// The instruction of the call that created the frame (`callsite`).
    pub callsite: usize,
    /// The frame's index in `VerifierState::frames`.
    pub frameno: u32,
    pub subprogno: u32,
    /// Set while verifying a callback body.
    pub in_callback_fn: bool,
    /// Set while verifying an async callback (timer).
    pub in_async_callback_fn: bool,
    /// Range R0 must be in when the callback returns.
    pub callback_ret_range: (i64, i64),
    /// `callback_depth`: how often the callback's loop body was explored.
    pub callback_depth: u32,
    /// The registers' and slots' read marks (kernels before 6.15; empty otherwise).
    pub marks: crate::read_marks::ReadMarks,
}

impl FuncState {
    /// A fresh frame: every register not initialised, no stack.
    pub fn new(callsite: usize, frameno: u32, subprogno: u32) -> FuncState {
        FuncState {
            regs: [RegState::not_init(); Reg::COUNT],
            stack: Vec::new(),
            callsite,
            frameno,
            subprogno,
            in_callback_fn: false,
            in_async_callback_fn: false,
            callback_ret_range: (0, 0),
            callback_depth: 0,
            marks: Default::default(),
        }
    }

    /// Bytes of stack allocated (`allocated_stack`).
    pub fn allocated_stack(&self) -> usize {
        self.stack.len() * SLOT_SIZE
    }

    /// Grows the stack to cover `size` bytes below the frame pointer.
    pub fn grow_stack(&mut self, size: usize) {
        let slots = size.div_ceil(SLOT_SIZE);
        if slots > self.stack.len() {
            self.stack.resize(slots, StackSlot::default());
        }
    }
}

/// The state of one path through the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierState {
    /// Frames from the entry (index 0) to the current one (`curframe`).
    pub frames: Vec<FuncState>,
    pub refs: Vec<RefState>,
    /// Set on a path a speculative-execution check pushed (never, for root loads).
    pub speculative: bool,
    /// Depth of `may_goto` iterations on this path.
    pub may_goto_depth: u32,
    /// The instruction this state was pushed for / is at.
    pub insn_idx: usize,
    /// The previous instruction, for the log's "from N to M" lines.
    pub prev_insn_idx: usize,
    /// Held lock count (`active_locks`).
    pub active_locks: u32,
    /// In an RCU read section (`active_rcu_lock`).
    pub active_rcu_lock: u32,
    /// Nested `bpf_preempt_disable` sections (`active_preempt_locks`).
    pub active_preempt_locks: u32,
    /// The id of the last irq state `bpf_local_irq_save` saved and not yet restored
    /// (`active_irq_id`; 0: interrupts not disabled).
    pub active_irq_id: u32,
    /// Instructions with jumps taken on this path since the last checkpoint, with the registers
    /// and stack slots they touched, for precision backtracking (`jmp_history`).
    pub jmp_history: Vec<JmpHistoryEntry>,
    /// Index of the checkpoint this state descends from in the explored-state table.
    pub parent: Option<usize>,
    /// The first instruction of this state's stretch of the path (where its checkpoint was
    /// taken) and the last one before it (`first_insn_idx`, `last_insn_idx`), for precision
    /// backtracking.
    pub first_insn_idx: usize,
    pub last_insn_idx: usize,
    /// Checkpoints between the entry and this state (`dfs_depth`).
    pub dfs_depth: u32,
    /// Callback bodies entered on this path (`callback_unroll_depth`).
    pub callback_unroll_depth: u32,
}

/// `INSN_F_FRAMENO_MASK`: the frame of a stack access, in the history flags (4 bits, for
/// 7.2's 16 frames).
pub const INSN_F_FRAMENO_MASK: u32 = 0xf;
/// `INSN_F_SPI_SHIFT` / `INSN_F_SPI_MASK`: the slot of a stack access.
pub const INSN_F_SPI_SHIFT: u32 = 4;
pub const INSN_F_SPI_MASK: u32 = 0x3f;
/// `INSN_F_STACK_ACCESS`: the instruction spilled or filled a register.
pub const INSN_F_STACK_ACCESS: u32 = 1 << 10;
/// `INSN_F_DST_REG_STACK` / `INSN_F_SRC_REG_STACK`: a jump compared a stack pointer.
pub const INSN_F_DST_REG_STACK: u32 = 1 << 11;
pub const INSN_F_SRC_REG_STACK: u32 = 1 << 12;

/// One entry of the jump history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JmpHistoryEntry {
    pub idx: usize,
    pub prev_idx: usize,
    /// `INSN_F_*` flags: stack access frame/slot, which operands of a jump were stack pointers.
    pub flags: u32,
    /// The scalars a conditional jump refined together (`linked_regs`, packed by
    /// [`LinkedRegs::pack`]); 0 when none.
    pub linked_regs: u64,
}

/// One scalar of a linked set: a register or a spilled stack slot of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkedReg {
    pub frameno: usize,
    pub is_reg: bool,
    /// The register number, or the stack slot index.
    pub index: usize,
}

/// The scalars sharing an id at a conditional jump (`struct linked_regs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkedRegs {
    pub entries: Vec<LinkedReg>,
}

impl LinkedRegs {
    /// `linked_regs_pack`: the count in 3 bits, then an entry per link (frame, is_reg 1,
    /// index 6). Six links (6.12, 6.18) come from kernels of 8 frames, so 3 frame bits; up
    /// to five (7.2 keeps five) may come from 7.2's 16 frames, so 4. Both fit 64 bits.
    pub fn pack(&self) -> u64 {
        let frame_bits = Self::frame_bits(self.entries.len());
        let mut v = self.entries.len() as u64;
        for (i, e) in self.entries.iter().enumerate() {
            debug_assert!(e.frameno < 1 << frame_bits, "frame {} in a link", e.frameno);
            let bits = e.frameno as u64
                | ((e.is_reg as u64) << frame_bits)
                | ((e.index as u64 & 63) << (frame_bits + 1));
            v |= bits << (3 + (frame_bits + 7) * i as u32);
        }
        v
    }

    /// `linked_regs_unpack`.
    pub fn unpack(v: u64) -> LinkedRegs {
        let cnt = (v & 7) as usize;
        let frame_bits = Self::frame_bits(cnt);
        let entries = (0..cnt)
            .map(|i| {
                let bits = v >> (3 + (frame_bits + 7) * i as u32);
                LinkedReg {
                    frameno: (bits & ((1 << frame_bits) - 1)) as usize,
                    is_reg: bits & (1 << frame_bits) != 0,
                    index: ((bits >> (frame_bits + 1)) & 63) as usize,
                }
            })
            .collect();
        LinkedRegs { entries }
    }

    fn frame_bits(links: usize) -> u32 {
        if links > 5 { 3 } else { 4 }
    }
}

impl VerifierState {
    /// The entry state: one frame.
    pub fn new() -> VerifierState {
        VerifierState {
            frames: vec![FuncState::new(BPF_MAIN_FUNC, 0, 0)],
            refs: Vec::new(),
            speculative: false,
            may_goto_depth: 0,
            insn_idx: 0,
            prev_insn_idx: 0,
            active_locks: 0,
            active_rcu_lock: 0,
            active_preempt_locks: 0,
            active_irq_id: 0,
            jmp_history: Vec::new(),
            parent: None,
            first_insn_idx: 0,
            last_insn_idx: 0,
            dfs_depth: 0,
            callback_unroll_depth: 0,
        }
    }

    pub fn curframe(&self) -> usize {
        self.frames.len() - 1
    }

    pub fn cur(&self) -> &FuncState {
        self.frames.last().expect("at least one frame")
    }

    pub fn cur_mut(&mut self) -> &mut FuncState {
        self.frames.last_mut().expect("at least one frame")
    }

    /// The current frame's register.
    pub fn reg(&self, reg: Reg) -> &RegState {
        &self.cur().regs[reg.index()]
    }

    pub fn reg_mut(&mut self, reg: Reg) -> &mut RegState {
        &mut self.cur_mut().regs[reg.index()]
    }
}

impl Default for VerifierState {
    fn default() -> Self {
        VerifierState::new()
    }
}

impl VerifierState {
    /// After a call: R1-R5 are not readable any more (`caller_saved` marked not init).
    /// Calls `f` on every register and spilled register of every frame
    /// (`bpf_for_each_reg_in_vstate`).
    pub fn for_each_reg_mut(&mut self, mut f: impl FnMut(&mut RegState)) {
        for frame in &mut self.frames {
            frame.regs.iter_mut().for_each(&mut f);
            for slot in frame.stack.iter_mut() {
                if slot.is_spilled_reg() {
                    f(&mut slot.spilled_ptr);
                }
            }
        }
    }

    pub fn clobber_caller_saved(&mut self) {
        for r in 1..=5 {
            self.cur_mut().regs[r] = RegState::not_init();
        }
    }

    /// After a helper that changes packet data: every packet pointer in every frame, register
    /// or spill, becomes an unknown scalar (`clear_all_pkt_pointers`).
    pub fn invalidate_packet_pointers(&mut self) {
        // Packet pointers and slices of packet dynptrs (`reg_is_dynptr_slice_pkt`).
        let into_packet = |r: &RegState| {
            r.is_pkt_pointer()
                || r.ty == super::RegType::PacketEnd
                || (r.ty == super::RegType::Mem && r.flags & super::reg::MEM_PKT_SLICE != 0)
        };
        for frame in &mut self.frames {
            for reg in frame.regs.iter_mut() {
                if into_packet(reg) {
                    *reg = RegState::unknown_scalar();
                }
            }
            for slot in frame.stack.iter_mut() {
                if slot.is_spilled_reg() && into_packet(&slot.spilled_ptr) {
                    slot.spilled_ptr = RegState::unknown_scalar();
                }
            }
        }
    }

    /// Records a new reference acquired at `insn_idx` (`acquire_reference`); returns its id.
    pub fn acquire_reference(&mut self, kind: RefKind, id: u32, insn_idx: usize) -> u32 {
        self.refs.push(RefState {
            kind,
            id,
            insn_idx,
            ptr: 0,
        });
        id
    }

    /// Records a held lock of map value `ptr` through a pointer of id `id`
    /// (`acquire_lock_state`).
    pub fn acquire_lock(&mut self, id: u32, ptr: u32, insn_idx: usize) {
        self.refs.push(RefState {
            kind: RefKind::Lock,
            id,
            insn_idx,
            ptr,
        });
        self.active_locks += 1;
    }

    /// Drops the held lock `(id, ptr)` (`release_lock_state`); false when it is not held.
    pub fn release_lock(&mut self, id: u32, ptr: u32) -> bool {
        let held = |r: &RefState| r.kind == RefKind::Lock && r.id == id && r.ptr == ptr;
        match self.refs.iter().position(held) {
            Some(i) => {
                self.refs.remove(i);
                self.active_locks -= 1;
                true
            }
            None => false,
        }
    }

    /// The lock taken last and still held (`active_lock_id`, `active_lock_ptr`).
    pub fn active_lock(&self) -> Option<(u32, u32)> {
        self.refs
            .iter()
            .rev()
            .find(|r| r.kind == RefKind::Lock)
            .map(|r| (r.id, r.ptr))
    }

    /// Drops reference `id`; false when no such reference is held.
    pub fn release_reference_state(&mut self, id: u32) -> bool {
        match self.refs.iter().position(|r| r.id == id) {
            Some(i) => {
                self.refs.remove(i);
                true
            }
            None => false,
        }
    }
}
