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
/// keeps for a pointer whose range is unknown. Only the words are modelled: the verdicts on
/// the corpus and fixtures are the same, and 7.x's region check of a variable offset is not.
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

/// A register's fixed offset is part of its `var_off` (7.x has no `reg->off`), so a
/// misaligned access names two offsets, `0+-4`; before, three, `0+0+-4`.
pub fn folds_fixed_offset_into_var_off(kernel: KernelVersion) -> bool {
    kernel >= KernelVersion::V7_2
}
