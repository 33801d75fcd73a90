//! Behaviour switches: where the verifier's code (not its tables) differs between the kernels
//! bpfemu answers as, and so processed counts differ. Each switch is one question about the
//! kernel, answered from the version where the kernel changed; the walk asks it at the one
//! place the behaviour lives, so there is a single verifier.

use bpfemu_isa::KernelVersion;

/// An array lookup by a constant key in range returns a `map_value` that is never NULL, so
/// the program's NULL check has one side only (`can_elide_value_nullness`, from "bpf:
/// verifier: Support eliding map lookup nullness", Linux 6.14). Before, the lookup returns
/// `map_value_or_null` and both sides of the check are walked.
pub fn elides_array_lookup_nullness(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V6_12
}

/// Two states holding a lock are equivalent when their lock ids correspond through the id
/// map, as other ids do ("bpf: use check_ids() for active_lock comparison", Linux 6.7).
/// Before, `states_equal` wanted the very same `active_spin_lock` id, so a lock taken on a
/// second path (a new id) never matched a state saved on the first.
pub fn maps_lock_ids_in_states_equal(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A scalar written to an aligned stack slot is kept as a spilled register whatever its
/// value, a `BPF_ST` of zero too, and a partial spill leaves `STACK_ZERO` bytes beside it as
/// they were ("bpf: Track spilled unbounded scalars", "bpf: track aligned STACK_ZERO cases
/// as imprecise spilled registers", "bpf: preserve STACK_ZERO slots on partial reg spills",
/// Linux 6.8). Before, only bounded non-zero scalars were spilled: a zero became
/// `STACK_ZERO` (its register made precise), an unbounded scalar `STACK_MISC`, and a partial
/// spill turned zero bytes into `STACK_MISC`.
pub fn spills_zero_and_unbounded_scalars(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A callback called synchronously by a helper (`bpf_loop`, `bpf_for_each_map_elem`, ...) is
/// walked as a loop: its body is queued at the call, its `exit` returns to the call, which is
/// a checkpoint, until the states converge ("bpf: verify callbacks as if they are called
/// unknown number of times", Linux 6.7). Before, the walk entered the callback once at the
/// call and went on after the call from its `exit`, as for a subprogram.
pub fn iterates_sync_callbacks(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// OR, XOR and MUL of a scalar by a scalar that is not a constant keep bounds computed from
/// both (`is_safe_to_compute_dst_reg_range`, from "bpf/verifier: improve XOR and OR range
/// computation", Linux 6.10, and the MUL relaxation after it). Before, only ADD, SUB and AND
/// took an unknown source; anything else made the destination an unknown scalar.
pub fn bounds_bitwise_ops_of_unknown_scalars(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A scalar that is 0 or -1, ANDed or ORed with a constant, is explored as each of the two
/// values (`maybe_fork_scalars`, in Debian's 6.12 and later). Before, it stayed one range.
pub fn forks_zero_or_minus_one_scalars(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A stack slot holding an imprecise spilled scalar on one side and plain `STACK_MISC` or
/// `STACK_ZERO` bytes on the other compares as two scalars (`scalar_reg_for_stack` in
/// `stacksafe`, "bpf: handle scalar spill vs all MISC in stacksafe()", Linux 6.8). Before,
/// the slot types had to be the same, `STACK_MISC` over `STACK_ZERO` aside.
pub fn compares_stack_scalars_as_registers(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A packet access past its proven range is refused in the words of a memory region's check,
/// "R1 min value is outside of the allowed memory range" (`check_packet_access` calling
/// `check_mem_region_access` in 7.x); before, "R1 offset is outside of the packet", which 7.x
/// keeps for a pointer whose range is unknown. Only the words are modelled (which end, "min"
/// or "max", from the folded bounds: `mem::packet_region_words`); the verdict is the same.
pub fn words_packet_access_as_region(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// Each frame's stack depth is rounded as the JIT rounds it, to 16 bytes, in the total of a
/// call chain (`round_up_stack_depth` of 6.12, with the JIT on). Before (5.10, 6.1, measured
/// in their VMs on their own selftests), every frame counted `round_up(max(depth, 1), 32)`:
/// three frames of 160 bytes made 672, not 608.
pub fn rounds_stack_depth_to_16(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// The log names a scalar register's type `scalar` ("bpf: Small BPF verifier log
/// improvements", Linux 5.17); before, `inv` (`R0 invalid mem access 'inv'` in 5.10).
pub fn names_scalars_scalar(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V5_10
}

/// A constant `var_off` in a message (`misaligned stack access off 0+-8+2`) prints as a
/// number; before (5.10, 6.1), `tnum_strn` printed every tnum as `(0x0; 0x0)`.
pub fn prints_constant_var_off_as_number(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A conditional jump is decided and refined from the ranges of both operands, whatever
/// they are ("bpf: generalize is_branch_taken to work with two registers", "bpf: generalize
/// reg_set_min_max() to handle two sets of two registers", "bpf: make the verifier track the
/// 'not equal' for regs", Linux 6.8). Before, only a comparison with a constant source
/// (an immediate, or a register whose value is known) was decided, `==`/`!=` only when the
/// other side was a constant too; `!=` taught nothing (not even that an end of the range
/// equal to the constant is excluded); a constant destination refined the source; and two
/// registers that are both unknown learnt something only from a 64-bit `==`.
pub fn compares_register_ranges(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// Two pointers compared equal, one of them known non-NULL, make the other non-NULL on the
/// equal edge ("bpf: propagate nullness information for reg to reg comparisons", Linux
/// 6.2). Before, only a comparison with zero settled a pointer's nullness.
pub fn infers_non_null_from_pointer_equality(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A helper's size register that may be zero, where zero is not allowed, is refused for its
/// range: "R4 invalid zero-sized read: u64=[0,63]" ("bpf: Simplify checking size of helper
/// accesses", Linux 6.8). Before, the memory argument was checked for an access of zero
/// bytes, and the refusal was that memory's: "R3 min value is outside of the allowed memory
/// range" for a map value or ring buffer record, "R3 offset is outside of the packet" for
/// packet data, "invalid zero-sized read" for the stack.
pub fn refuses_zero_size_by_its_range(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// An `exit` of the main program holding what must be released is refused for it by
/// `check_resource_leak`: "BPF_EXIT instruction in main prog cannot be used inside
/// bpf_spin_lock-ed region", "... would lead to reference leak" after the `Unreleased
/// reference` lines (6.13 on; 6.18 and 7.2 have it). Before, in 6.12 and earlier, each
/// resource had its own words: "bpf_spin_unlock is missing", "bpf_rcu_read_unlock is
/// missing", "N bpf_preempt_enable is missing", and a leaked reference's `Unreleased
/// reference id=N alloc_insn=M` was the last line.
pub fn words_exit_leaks_by_resource(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V6_12
}

/// A helper's access to the stack out of its bounds is worded by its direction, "invalid
/// write to stack R1 off=-48 size=58" (6.18 and 7.2, where helper accesses carry a read or
/// write type). In 6.12 and earlier a helper's access was "invalid indirect access to stack
/// R1 off=-48 size=58", the kernel not knowing whether the helper reads or writes.
pub fn words_helper_stack_access_by_direction(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V6_12
}

/// A call of a global function that may sleep (it calls a sleepable helper or kfunc, or a
/// function that does) is refused where sleeping is not allowed, an XDP program everywhere
/// ("global functions that may sleep are not allowed in non-sleepable context", with the
/// `might_sleep` summary of each subprogram: in 6.18 and 7.2, not in 6.12). Before, the call
/// was assumed valid and the function's own verification refused the sleepable call in it.
pub fn refuses_global_calls_that_may_sleep(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V6_12
}

/// A scalar divided by, or taken modulo, a constant keeps a range: unsigned and signed, 32
/// and 64 bits, `x / 0 = 0` and `x % 0 = x` included (`scalar_min_max_udiv`, `_sdiv`,
/// `_umod`, `_smod` and their 32-bit twins in 7.2's `adjust_scalar_min_max_vals`, with
/// `is_safe_to_compute_dst_reg_range` allowing DIV and MOD by a constant; from the series
/// posted to bpf@vger in January 2026, tested by `verifier_div_mod_bounds.c`; not in 6.18).
/// Before, the result of any division or modulo was an unknown scalar.
pub fn bounds_div_mod_by_constant(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A helper's memory argument (`ARG_PTR_TO_MEM`, map key or value) takes the context too:
/// 7.2's `mem_types` ends with `PTR_TO_CTX`, so a context pointer reaches
/// `check_func_arg_reg_off` (refused when moved: "dereference of modified ctx ptr R1
/// off=4 disallowed") and `check_helper_mem_access` (only a syscall program's context may be
/// read there; anything else is "R1 type=ctx expected=fp"). 6.18's list has no `ctx`: the
/// words were "R1 type=ctx expected=fp, pkt, ...". For XDP the verdict is the same.
pub fn passes_ctx_as_helper_memory(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A pointer's offset past its base is one number in 7.x's words: 7.2's
/// `check_generic_ptr_alignment` prints "misaligned stack access off -8+2 size 8" (the
/// register's `var_off`, its fixed offset folded in, then the instruction's), where 6.18
/// printed "off 0+-8+2" (`var_off`, then the register's fixed `off`, then the
/// instruction's); and a memory region's access whose pointer, fixed offset included, may
/// be below its base is "R0 min value is negative, ..." where 6.18, looking at the variable
/// part only, said "R0 min value is outside of the allowed memory range". Only the words
/// are modelled (both refuse); bpfemu keeps the fixed offset apart.
pub fn words_pointer_offset_as_one(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A message about a kfunc's or a global function's argument names its register, "Possibly
/// NULL pointer passed to trusted R1", "expected an initialized iter_bits as R1", "R1
/// expects pointer to ctx" (7.2's `reg_arg_name`); 6.18 named the argument, "arg0", "arg #0"
/// or "arg#0" depending on the check.
pub fn names_call_args_by_register(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A global function's memory argument not tagged nullable refuses a NULL constant ("R1 is
/// expected to be non-NULL"), and any memory argument refuses a packet pointer when the
/// function may change packet data ("R1 is a packet pointer, but func#1 may change packet
/// data"): 7.2's `btf_check_func_arg_match`. 6.18 let a NULL through (its `check_mem_reg`
/// passes a NULL before the non-NULL test, so the callee, assumed valid, reads address 0)
/// and took the packet pointer, invalidating the caller's packet pointers after the call.
pub fn refuses_null_and_stale_packet_global_args(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A maybe-NULL pointer compared for equality with a register known to be zero is NULL on
/// one side and not NULL on the other, as against the immediate 0 (7.2's
/// `check_cond_jmp_op`: `BPF_X && bpf_register_is_null(src_reg)`, the zero made precise;
/// `verifier_jeq_infer_not_null.c`'s `jeq_reg_reg_null_check`). 6.18 inferred nothing from a
/// register, so the pointer stayed maybe-NULL on both sides.
pub fn infers_null_from_a_null_register(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A helper or global function that may sleep, called where nothing may, is refused naming
/// the call and the reason ("sleepable helper bpf_copy_from_user#148 in non-sleepable
/// prog", "sleepable global function f() called in rcu_read_lock region": 7.2's
/// `non_sleepable_context_description`). 6.18 said "helper call might sleep in a
/// non-sleepable prog" and, for a global function, "a non-sleepable BPF program context".
pub fn words_sleeping_calls_by_context(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A helper's or kfunc's access to the stack turns what it touches into unknown data even
/// when it only reads it (6.12 and earlier: `check_stack_range_initialized` sets `clobber` for
/// every `ACCESS_HELPER`, so a map key built of zeros and spilled constants is `mmmmmmmm` after
/// the lookup). From 6.18 only a write does (`clobber = type == BPF_WRITE`).
pub fn clobbers_stack_on_helper_reads(kernel: KernelVersion) -> bool {
    kernel <= KernelVersion::V6_12
}

/// Scalars stay linked through `rX += const` (the delta kept with the id, 6.11's "track
/// delta between linked registers"), through a 32-bit move of a value that fits, at most
/// six at a time among what is still live, and precision follows the links back
/// (`linked_regs` in the jump history). Before (5.10, 6.1), only a 64-bit register move
/// links two scalars, any arithmetic on one unlinks it (`dst_reg->id = 0`), and a branch
/// gives its range to every copy (`find_equal_scalars`).
pub fn links_scalars_by_delta(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A dynptr may be made where one already is: the old one is destroyed first (6.12 and
/// later). 6.1 refuses it, "Dynptr has to be an uninitialized dynptr".
pub fn overwrites_dynptrs_in_place(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `tnum_mul` takes, where a bit of the multiplier is unknown, the union of the products with
/// that bit 0 and 1 (6.18): `(x & 2 | 1) * 3` is 3 or 9, bit 2 known zero. Before, the known
/// values' product plus every partial product's unknown bits, which knows less.
pub fn multiplies_tnums_by_union(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A stack access at a variable offset out of bounds is named with its fixed offset too,
/// "var_off=(0x0; 0xff) off=-264 size=1" (6.12 and later); 5.10 and 6.1 print "var_off=(0x0;
/// 0xff) size=1".
pub fn words_variable_stack_offsets_with_fixed_part(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A write at a variable offset over a spilled register turns the whole slot into data
/// (`scrub_special_slot`), and a zero written over a spilled zero keeps it (6.12 and later).
/// Before, only the register goes (`spilled_ptr.type = NOT_INIT`): the bytes the write cannot
/// reach still say spill, and a fill of the slot is "invalid size of register fill".
pub fn scrubs_spills_under_var_off_writes(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// The delta links follow `rX -= const` and 32-bit adds too, and a negative constant (6.18's
/// `BPF_ADD_CONST32`/`64`). 6.12 links a 64-bit `rX += const` of 0 to S32_MAX only.
pub fn links_by_subtraction_and_32_bit_adds(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A fill of part of a spilled scalar keeps what the spill knew, narrowed to the fill's size
/// (6.8, "narrowing fill"; the probe kernels show it from 6.12): `w0 = atomic_cmpxchg` on the
/// low half of a spilled -1 is 0xffffffff. Before, only a fill of the spill's own size at the
/// slot's start restores it; any other is an unknown scalar (6.1 walks both sides of the
/// raw selftest `BPF_W_cmpxchg_should_zero_top_32_bits`, 13 instructions, not 11).
pub fn narrows_spilled_scalar_fills(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A pointer that may only be used unmoved and has moved below its start is refused in words
/// of its own, "negative offset ctx ptr R1 off=-1 disallowed" (6.1 on). 5.10 has one message
/// for every move: "dereference of modified ctx ptr R1 off=-1 disallowed".
pub fn words_negative_pointer_offsets_apart(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_1
}

/// A pointer passed to a release function must have no offset, whatever its type: "R1 must
/// have zero offset when passed to release func or trusted arg to kfunc" (6.2 on, as the probe
/// kernels show from 6.12). 6.1 checks a kernel object's offset alone ("... to release func")
/// and a ring buffer record as any pointer that must not have moved ("dereference of modified
/// alloc_mem ptr R1 off=51966 disallowed", its raw selftest `ringbuf_invalid_reservation_offset_1`).
pub fn checks_release_offsets_of_every_type(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `check_cfg` lets a root program loop through any edge (6.12: `push_insn` without
/// `loop_ok`). Before, a back-edge that is the fall-through of a plain instruction or of a
/// call, or a call into a subprogram already on the walk's stack (recursion), is refused:
/// "back-edge from insn 87 to 88"; only a jump's edge may close a loop.
pub fn closes_loops_by_any_edge(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A subprogram that calls itself, directly or through others, is refused before the walk
/// ("recursive call from f() to g()", 7.x's `sort_subprogs_topo`). Before, the walk follows
/// the calls until the call stack is too deep (6.12, 6.18), or `check_cfg` finds the call's
/// edge a back-edge (5.10, 6.1: [`closes_loops_by_any_edge`]).
pub fn refuses_recursion_before_the_walk(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A conditional jump's destination register is read before its other fields are checked
/// (6.1's `check_cond_jmp_op`: dst, then a `BPF_X`'s imm and src, or a `BPF_K`'s src field).
/// 5.10 checks the reserved field and reads src first, dst last: an uninitialised dst with
/// a set imm is "BPF_JMP/JMP32 uses reserved fields" there, "R2 !read_ok" later.
pub fn reads_jump_dst_before_its_fields(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_1
}

/// A read of the stack grows the frame's allocated stack as a write does, so root may read
/// any of its 512 bytes, written or not (6.12, 6.18 and 7.2, measured). In Debian's 5.10 and
/// 6.1 builds only writes grow it: a load or a helper's read below the deepest write is
/// refused, though root may read uninitialised bytes above it.
pub fn reads_grow_the_stack(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// Spill/fill pairs around a call to a helper or kfunc the kernel inlines (`bpf_fastcall`) are
/// removed after verification and their slots taken off the stack depth ("bpf: no_caller_saved_
/// registers attribute for helper calls", Linux 6.12). Before, they stay and count.
pub fn removes_fastcall_spills(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `r <<= 32` turns the s32 range into the s64 range, negative bounds included
/// (`__scalar64_min_max_lsh`, 6.1 on). 5.10 keeps a bound only when it is not negative, and
/// forgets the other: after `w0 s>>= 28; r0 <<= 32; r0 s>>= 32`, `if r0 s< -8` may be taken
/// there (the probe bounds/lsh_by_32_keeps_negative_s32_bounds_ok, refused by 5.10).
pub fn shifts_negative_s32_bounds_by_32(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_1
}

/// "Expected an initialized dynptr as arg #N" numbers the arguments from 0 (6.12 on); 6.1
/// from 1 (the probes dynptr/read_uninitialised_dynptr_bad and
/// local_dynptr_overwritten_then_read_bad: "arg #3" for r3 in the 6.1 VM).
pub fn numbers_dynptr_args_from_zero(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A store of an immediate (`BPF_ST`) into the ctx is checked as any ctx write ("bpf: allow
/// ctx writes using BPF_ST_MEM instruction", 6.3). 5.10 and 6.1 refuse it first ("BPF_ST
/// stores into R1 ctx is not allowed"; the probe ctx/write_immediate_rx_queue_bad there).
pub fn stores_immediates_into_ctx(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// Arithmetic on any pointer that may be NULL is refused with a hint ("R0 pointer arithmetic
/// on sock_or_null prohibited, null-check it first", 6.1 on). 5.10 gives the hint for a map
/// value only (the probe sockets/arith_unchecked_bad in the 5.10 VM).
pub fn words_every_nullable_pointer_arith(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_1
}

/// A tail call through a map that is not a prog array is refused in words ("expected prog
/// array map for tail call", 6.18's `record_func_key`); before, as an internal error ("kernel
/// subsystem misconfigured verifier"; the probe helpers/tail_call_wrong_map_bad in the 5.10,
/// 6.1 and 6.12 VMs).
pub fn words_tail_call_map_check(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A map value without the special field a helper needs is refused as "map 'm' has no
/// valid bpf_timer" (6.2's `btf_record`); 5.10 and 6.1 say "map 'm' doesn't have 'struct
/// bpf_timer'" (the probe timer/map_btf_without_timer_bad in the 6.1 VM).
pub fn words_map_fields_from_btf_record(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A bpf_spin_lock is held as its object and the pointer's id (6.2's `active_lock`), so a
/// lock taken through a pointer without an id is held too. 5.10 and 6.1 keep the id alone: a
/// timer callback's map value (id 0) takes a lock the verifier then forgets, and the callback
/// may exit holding it (the probe timer/callback_exits_with_lock_held_bad, accepted by 6.1).
pub fn tracks_locks_by_object(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `LINKED_REGS_MAX`: how many registers and stack slots one jump refines together (from 6.12,
/// which bounds them; past it a copy loses its link). 7.2 packs a jump's links into one
/// 64-bit history word and keeps 5; 6.12 and 6.18 keep 6 (the probe
/// linked_regs/sixth_copy_is_linked_ok, refused by 7.2).
pub fn linked_regs_max(kernel: KernelVersion) -> usize {
    match kernel >= KernelVersion::V7_2 {
        true => 5,
        false => 6,
    }
}

/// `MAX_CALL_FRAMES`: how many frames a call chain may hold, the entry function's included.
/// 7.2 allows 16; the kernels before it 8 (the fixture tests/data/kernels/call_depth.o: 9
/// and 16 frames accepted by 7.2 alone, 17 refused everywhere). The walk refuses the call
/// that would open one frame too many, and `check_max_stack_depth` counts each chain again.
pub fn max_call_frames(kernel: KernelVersion) -> usize {
    match kernel >= KernelVersion::V7_2 {
        true => 16,
        false => 8,
    }
}

/// `check_max_stack_depth` counts a chain's frames afresh at a global function, whose own
/// walk began with one frame (7.2; call_depth.o's `global_in_chain`). Before, the count ran
/// on through it, so a chain of static calls under a global function could be refused after
/// both walks had accepted it ("the call stack of 8 frames is too deep !", 6.18 included).
pub fn counts_frames_afresh_at_global_functions(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A callback's R0 is held to its return range by its bounds, and a refusal gives them
/// ("has smin=2 smax=2 should have been in [0, 1]", 6.7's `retval_range`). 6.1 holds R0's tnum
/// within the range's tnum and prints both ("has value (0x2; 0x0) should have been in (0x0;
/// 0x1)"; probes callbacks/bpf_loop_callback_returns_two_bad and
/// user_ringbuf/drain_callback_returns_two_bad in the 6.1 VM); a timer callback's likewise, in
/// its own words ("At async callback the register R0 ...", "In async callback the register R0
/// is not a known value"), without marking R0 precise.
pub fn checks_return_ranges_by_bounds(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A scalar's four ranges inform one another across domains (6.7's `__reg32_deduce_bounds`,
/// `__reg64_deduce_bounds` and `__reg_deduce_mixed_bounds`, run twice by `reg_bounds_sync`):
/// the 32-bit ranges from the 64-bit ones, each signedness from the other where the range
/// keeps to one side of the sign boundary, the 64-bit range from the 32-bit ones. Before
/// (5.10, 6.1), one pass learns only the sign: `if w0 < 16; if w0 s> 1; if w0 s< 0` leaves
/// w0 in [16, 1] for 6.18, a dead path, and a live one for 6.1 (the probes
/// bounds/s32_check_after_u32_min_leaves_negative_ok and lsh_by_32_keeps_negative_s32_bounds_ok,
/// refused by 5.10 and 6.1).
pub fn deduces_bounds_across_domains(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `__reg_bound_offset` narrows the 32-bit tnum from the 64-bit one it has just narrowed by
/// the u64 range (6.1 on); 5.10 narrows it from the register's tnum as it was.
pub fn narrows_subreg_from_narrowed_tnum(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_1
}

/// A scalar whose u64 range holds a single member of its tnum is that constant (6.18's
/// `__update_reg64_bounds`, with `tnum_step`): `w0 != 0` on a value of tnum `(0x0; 0x200)`
/// leaves 512. Before, the range and the tnum stay as they are.
pub fn collapses_single_member_ranges(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// `BPF_NEG` and `BPF_END` (byte swaps) compute their result's bounds (6.18's
/// `adjust_scalar_min_max_vals`). Before, `check_alu_op` marks the destination unknown
/// (`be32 r1` leaves `scalar()`).
pub fn tracks_negation_and_byte_swaps(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// Precision backtracking follows a value through bpf-to-bpf calls, callbacks and exits
/// (6.4, "bpf: support precision propagation in the presence of subprogs"). Before, meeting
/// one (`-ENOTSUPP` in `backtrack_insn`) makes every scalar of every checkpoint above the one
/// the walk had reached precise (6.4 on: above the live state), which prunes less: katran's
/// balancer, whose two subprograms this hits, 20,633 instructions on 5.10 and 6.1.
pub fn backtracks_precision_through_calls(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// A checkpoint in a loop whose exploration has paths still to come is compared only as a
/// range (`RANGE_WITHIN`) and not cleaned: its marks do not yet hold what the loop reads
/// (6.7's loop entries, "bpf: correct loop detection for iterators convergence"; 6.18's SCCs).
/// Before, a checkpoint whose own paths are done is trusted like any other.
pub fn distrusts_checkpoints_in_unfinished_loops(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// What pruning compares comes from read marks each state carries up its chain of checkpoints
/// (`REG_LIVE_READ`, `mark_reg_read`, `propagate_liveness`, `clean_verifier_state`), for
/// registers and stack slots alike (`read_marks`). 6.15 moved the registers to a static
/// analysis (`compute_live_registers`) and 6.18 the slots to `liveness.c` (`stack_liveness`).
/// The marks are per path and prune more than 6.18 does on large programs: katran's balancer
/// is 20,633 instructions on 5.10 and 6.1, 25,114 on 6.12, 64,088 on 6.18.
pub fn keeps_read_marks_per_state(kernel: KernelVersion) -> bool {
    kernel <= KernelVersion::V6_12
}

/// Stack slots are live by a static pass over the program before the walk, not by what the
/// walk read (7.2's `liveness.c`, "bpf: static stack liveness data flow analysis" and the
/// series around it): which registers and spills point into which frame's stack is found by
/// a forward dataflow, each access through them marks 4-byte halves of slots, and the current
/// state forgets its dead halves at every prune point, so checkpoints are born clean
/// (`stack_liveness_static`). 6.18 recorded the walk's reads per call chain and cleaned a
/// checkpoint once its paths were done (`stack_liveness`): katran's balancer is 64,088
/// instructions on 6.18 and 41,673 on 7.2.
pub fn computes_stack_liveness_before_the_walk(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// The level-2 log carries the trace of the stack liveness analysis (`(0) frame 0 insn 12
/// +live -8`, `live stack update done in N iterations`), which 6.18's `liveness.c` prints.
/// Before 6.18 each stack slot carried read marks up its state's parent chain instead
/// (`keeps_read_marks_per_state`), and the log shows none of this.
pub fn prints_stack_liveness_trace(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A precise scalar with no id in the explored state prunes a current one whose id carries a
/// constant-offset link (`BPF_ADD_CONST`): the old register was independent, and the link only
/// adds constraints ("rold->id &&" in `regsafe`, in this machine's 6.18.44 and in the 6.12.117
/// source, not in Debian's 6.12.95 image, which wants the flags equal). Measured on the
/// selftests verifier_iterating_callbacks test2-4: 6.18 prunes the may_goto loop's back-edge at
/// its first return (18 instructions), 6.12.95 walks it once more (29).
pub fn prunes_linked_scalars_against_independent_ones(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A tail call in a subprogram is walked both ways: failing, the walk goes on after it (a
/// queued path); jumping, the subprogram returns there to its caller with R0 unknown and the
/// packet pointers gone (6.18's `check_helper_call`). Before (6.12.95 as measured: the selftest
/// verifier_tailcall_jit/main, 7 instructions there against 9), the walk only goes on after
/// it, as after any helper.
pub fn leaves_subprograms_by_tail_call(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A tail call forgets the packet pointers in the main program too: `bpf_helper_changes_pkt_data`
/// lists `bpf_tail_call` (the program it jumps to may move the packet before control comes
/// back to a caller; "bpf: consider that tail calls invalidate packet pointers", 6.13, in
/// Debian's 6.12.95). 6.18 makes an exception of the main program, where a tail call either
/// leaves the program or falls through with nothing moved (the probe
/// subprog/tail_call_in_main_keeps_packet_pointers_ok: refused by 6.12.95, accepted by 6.18).
/// 5.10 and 6.1 forget nothing at a tail call (`forgets_packets_at_tail_calls`).
pub fn forgets_packets_at_every_tail_call(kernel: KernelVersion) -> bool {
    forgets_packets_at_tail_calls(kernel) && kernel < KernelVersion::V6_18
}

/// A tail call, or a call of a global function that may move the packet (its helper calls,
/// tail calls or kfuncs, or its callees'), forgets the caller's packet pointers
/// (`changes_pkt_data` of subprograms, 6.13, in Debian's 6.12.95). 5.10 and 6.1 keep them:
/// only the packet helpers themselves forget them.
pub fn forgets_packets_at_tail_calls(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}

/// `scalar += fp` gives the scalar's register the stack pointer's frame number ("bpf: preserve
/// frameno for stack pointer arithmetic", after 6.18). Before, the frame number stays the
/// scalar's (0), so in a subprogram `r6 = -8; r6 += r10` is taken for the caller's fp-8 and a
/// store through it lands, for the verifier, in the caller's frame: 6.18 accepts the selftest
/// verifier_basic_stack/stack_ptr_arith_preserves_frameno, whose program then dereferences 0
/// (bpfemu's engines report that access, as the kernel's does not), and 7.2 refuses it.
pub fn carries_frameno_into_scalar_plus_pointer(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A write into a kernel struct that the program type's `btf_struct_access` refuses ends
/// with the verifier's own line, `R0 cannot write into ptr_bpf_map at off=64 size=4`, after
/// whatever the callback said (7.2; the probe map_ptr/btf_pointer_written_bad). Before, the
/// callback's words were the last ("only read is supported").
pub fn names_refused_btf_writes(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A helper argument that releases a dynptr (`bpf_ringbuf_submit_dynptr`) is checked as any
/// dynptr argument: initialised ("Expected an initialized dynptr as R1"), of the kind named
/// ("Expected a dynptr of type ringbuf as R1"), and not a caller's ("CONST_PTR_TO_DYNPTR
/// cannot be released"); a caller's dynptr may go to any other helper (7.2). Before, the
/// release came first ("arg 1 is an unacquired reference", "cannot release unowned const
/// bpf_dynptr"), and a caller's dynptr only to a helper that does not change it.
pub fn releases_dynptrs_as_dynptr_args(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A socket cast of a referenced socket (`bpf_skc_to_tcp_sock` of a lookup's result) is
/// walked as two paths: NULL first queued, then a non-NULL pointer sharing the socket's
/// reference (7.2, "explore the NULL case as a separate branch"; the probe
/// sockets/skc_to_tcp_sock_release_unchecked_cast_bad: 22 instructions and `R1 type=scalar`
/// in 7.2). Before, the result was one `ptr_or_null_` carrying the reference.
pub fn forks_null_of_referenced_casts(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// Every kfunc's pointer arguments are trusted (the `KF_TRUSTED_ARGS` default), so a NULL or
/// maybe-NULL one is refused before its type is checked ("Possibly NULL pointer passed to
/// trusted arg2"; 6.18 and 7.2). In 6.12 only kfuncs flagged `KF_TRUSTED_ARGS` or `KF_RCU`
/// had the rule, none of those bpfemu models for XDP (`bpf_dynptr_from_xdp`, the number
/// iterator, the dynptr and string kfuncs), so their type check speaks first ("arg#2
/// expected pointer to stack or const struct bpf_dynptr").
pub fn trusts_every_kfunc_pointer_arg(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A scalar that leaves its delta link (`rX ^= 0` after `rX += 5`) loses the delta with the
/// id (`clear_scalar_id`, 6.18 and 7.2). Debian's 6.12.95 cleared the id only: the stale
/// delta went with the register into the next id a copy gave it, and a comparison of one
/// copy set the other off by it (the probe linked_regs/stale_delta_after_cleared_id_bad,
/// accepted by 6.12 alone). The same fix refuses a link for `rX += rX`; 6.12.95 linked it by
/// the sum (the selftest verifier_linked_scalars/scalars_self_add_clears_id).
pub fn clears_delta_with_scalar_id(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// A kernel struct's pointer member to anything but a struct (`void *data` of
/// `struct xdp_buff`) reads as untrusted read-only memory (6.18 and 7.2). 6.12 read it as a
/// scalar (the probe kfunc_objects/kern_ctx_data_ok: "R1 invalid mem access 'scalar'").
pub fn reads_void_pointer_members_as_memory(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// `bpf_rdonly_cast` takes type id 0 for untrusted read-only memory (6.18 and 7.2). 6.12
/// casts to a struct only: any other id, unknown ones included, is "kfunc bpf_rdonly_cast
/// type ID argument must be of a struct".
pub fn casts_rdonly_to_void(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// The number iterator's kfuncs may be called holding a spin lock (`kfunc_spin_allowed`,
/// 6.18 and 7.2). 6.12 allowed the graph kfuncs only ("function calls are not allowed while
/// holding a lock"; the probe spin_lock/iter_num_loop_under_lock_ok).
pub fn allows_iterators_under_lock(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_18
}

/// `bpf_rcu_read_lock` may nest: the sections are counted, and RCU-protected pointers turn
/// untrusted when the outermost one ends (7.2, `active_rcu_locks`; the probe
/// kfunc_objects/rcu_nested_bad, accepted by 7.2). Before, a second lock was "nested rcu read
/// lock (kernel function bpf_rcu_read_lock)".
pub fn nests_rcu_read_locks(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}

/// A static subprogram may be called holding a spin lock, its own calls checked there (6.12
/// on). 5.10 and 6.1 refused any call but the unlock ("function calls are not allowed while
/// holding a lock"; the probe spin_lock/callee_unlocks_ok).
pub fn calls_subprograms_under_lock(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V6_12
}
