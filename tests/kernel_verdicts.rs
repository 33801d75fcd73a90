//! Verdicts and messages as each kernel gives them, where the verifier's code changed between
//! versions (`verifier/src/behaviour.rs`). The expected answers are what those kernels said,
//! booted under QEMU with libbpf 1.7 (`bpfemu-kernel-vms`): Debian's 5.10.0-32, 6.1.0-47,
//! 6.12.95+deb12 and 7.2.12+deb14 cloud kernels, and this machine's 6.18.44. CI judges the
//! same fixtures in those kernels again (tests/kernels_vs_vms.rs).

mod kernel_csv;

use kernel_csv::{KERNELS, verify_csv};

/// `verify OBJECT --kernel` every profile, as CSV: for `program`, per kernel in [`KERNELS`]
/// order, "accepted" or the final error line.
fn answers(object: &str, program: &str) -> Vec<String> {
    answers_on(object, program, &KERNELS)
}

/// [`answers`] for `kernels` only.
fn answers_on(object: &str, program: &str, kernels: &[&str]) -> Vec<String> {
    let csv = verify_csv(object, kernels);
    // Accepted everywhere (0) or rejected somewhere (1): never undecided or unreadable (2).
    assert!(matches!(csv.status, Some(0 | 1)), "{}", csv.text);
    kernels
        .iter()
        .map(|k| {
            let row = csv.row(&format!("{program} on {k}"), |r| {
                r["prog_name"] == program && r["kernel"] == *k
            });
            if row["verdict"] == "success" {
                "accepted".to_string()
            } else {
                row["error"].clone()
            }
        })
        .collect()
}

const RANGES: &str = "tests/data/kernels/range_compares.o";

/// `refuses_zero_size_by_its_range`: a size register in [0, 63] is refused by every kernel,
/// in the words of the memory it sizes before 6.8 and for its range from 6.8 on.
#[test]
fn a_size_that_may_be_zero_is_refused_in_each_kernels_words() {
    let old = "R1 min value is outside of the allowed memory range";
    let new = "R2 invalid zero-sized read: u64=[0,63]";
    assert_eq!(
        answers(RANGES, "zero_size_from_range"),
        [old, old, new, new, new]
    );
}

/// `compares_register_ranges`: `n != 0` excludes 0 from [0, 63] from 6.8 on.
#[test]
fn not_equal_cuts_the_end_of_a_range_from_6_8() {
    let old = "R1 min value is outside of the allowed memory range";
    assert_eq!(
        answers(RANGES, "not_equal_cuts_range_end"),
        [old, old, "accepted", "accepted", "accepted"]
    );
}

/// `compares_register_ranges`: `n < limit`, neither a constant, bounds `n` from 6.8 on.
#[test]
fn two_unknown_registers_bound_each_other_from_6_8() {
    let old = "R2 unbounded memory access, use 'var &= const' or 'if (var < const)'";
    assert_eq!(
        answers(RANGES, "range_against_range"),
        [old, old, "accepted", "accepted", "accepted"]
    );
}

/// `infers_non_null_from_pointer_equality`: a pointer equal to a checked one is not NULL,
/// from 6.2 on.
#[test]
fn a_pointer_equal_to_a_checked_one_is_not_null_from_6_2() {
    let old = "R0 invalid mem access 'map_value_or_null'";
    assert_eq!(
        answers(RANGES, "pointer_equal_to_checked"),
        [old, old, "accepted", "accepted", "accepted"]
    );
}

/// `profile/kfuncs.rs`: the key kfuncs are refused to XDP by 6.1 and 6.12 before any argument
/// is looked at, and callable from 6.13 on (5.10's BTF lacks them: the load fails first).
#[test]
fn key_kfuncs_reach_xdp_after_6_12() {
    let refused = "calling kernel function bpf_lookup_system_key is not allowed";
    assert_eq!(
        answers_on(
            "tests/data/kernels/key_kfuncs.o",
            "system_key",
            &KERNELS[1..]
        ),
        [refused, refused, "accepted", "accepted"]
    );
}

const LEAKS: &str = "tests/data/kernels/exit_leaks.o";

/// `words_exit_leaks_by_resource`: a reference leaked at `exit` ends the log with its own
/// line up to 6.12, with `check_resource_leak`'s words after.
#[test]
fn a_leaked_reference_is_worded_by_each_kernel() {
    let old = "Unreleased reference id=2 alloc_insn=4";
    let new = "BPF_EXIT instruction in main prog would lead to reference leak";
    assert_eq!(answers(LEAKS, "leaks_record"), [old, old, old, new, new]);
}

/// `words_exit_leaks_by_resource`: a lock held at `exit`.
#[test]
fn a_lock_held_at_exit_is_worded_by_each_kernel() {
    let old = "bpf_spin_unlock is missing";
    let new = "BPF_EXIT instruction in main prog cannot be used inside bpf_spin_lock-ed region";
    assert_eq!(
        answers(LEAKS, "exits_holding_lock"),
        [old, old, old, new, new]
    );
}

/// `words_helper_stack_access_by_direction`: a helper's access past the frame.
#[test]
fn a_helpers_stack_access_is_worded_by_each_kernel() {
    let old = "invalid indirect access to stack R2 off=-2 size=4";
    let new = "invalid read from stack R2 off=-2 size=4";
    assert_eq!(
        answers(LEAKS, "key_past_the_frame"),
        [old, old, old, new, new]
    );
}

const SLEEPY: &str = "tests/data/kernels/sleepy_global.o";

/// `refuses_global_calls_that_may_sleep` and `words_sleeping_calls_by_context`: a global
/// function calling a sleepable helper.
#[test]
fn a_global_function_that_may_sleep_is_refused_where_each_kernel_looks() {
    let unknown = "unknown func bpf_copy_from_user#148";
    assert_eq!(
        answers(SLEEPY, "calls_sleepy_global"),
        [
            unknown,
            unknown,
            "program of this type cannot use helper bpf_copy_from_user#148",
            "a non-sleepable BPF program context",
            "sleepable global function copy_word() called in non-sleepable prog",
        ]
    );
}

/// `words_sleeping_calls_by_context`: the sleepable helper called from XDP itself.
#[test]
fn a_sleepable_helper_is_refused_in_each_kernels_words() {
    let unknown = "unknown func bpf_copy_from_user#148";
    assert_eq!(
        answers(SLEEPY, "calls_sleepy_helper"),
        [
            unknown,
            unknown,
            "program of this type cannot use helper bpf_copy_from_user#148",
            "helper call might sleep in a non-sleepable prog",
            "sleepable helper bpf_copy_from_user#148 in non-sleepable prog",
        ]
    );
}

const GLOBAL_ARGS: &str = "tests/data/kernels/global_arg_null.o";

/// `refuses_null_and_stale_packet_global_args`: a NULL constant passed for a global
/// function's `arg:nonnull` memory argument. 5.10 takes no memory pointer, 6.1 reads no tag
/// (the argument may be NULL, and the function dereferences it), 6.12 and 6.18 let the NULL
/// through, 7.2 refuses it at the call. (Each kernel's answer as it gave it, booted.)
#[test]
fn a_null_for_a_nonnull_argument_is_refused_from_7_2() {
    let unsupported = "Arg#0 type PTR in product() is not supported yet.";
    let maybe_null = "R1 invalid mem access 'mem_or_null'";
    let refused = "Caller passes invalid args into func#1 ('product')";
    assert_eq!(
        answers(GLOBAL_ARGS, "null_to_nonnull"),
        [unsupported, maybe_null, "accepted", "accepted", refused]
    );
    assert_eq!(
        answers(GLOBAL_ARGS, "stack_to_nonnull"),
        [unsupported, maybe_null, "accepted", "accepted", "accepted"]
    );
}

/// `refuses_null_and_stale_packet_global_args`: a packet pointer passed to a global function
/// that may change packet data, refused at the call from 7.2 on; one that only reads is
/// taken. 5.10 and 6.1 refuse both functions as in the NULL test.
#[test]
fn a_packet_pointer_for_a_function_that_moves_the_packet_is_refused_from_7_2() {
    assert_eq!(
        answers(GLOBAL_ARGS, "packet_to_pulling_global"),
        [
            "Arg#1 type PTR in read_then_pull() is not supported yet.",
            "R2 invalid mem access 'mem_or_null'",
            "accepted",
            "accepted",
            "Caller passes invalid args into func#1 ('read_then_pull')",
        ]
    );
    assert_eq!(
        answers(GLOBAL_ARGS, "packet_to_reading_global"),
        [
            "Arg#0 type PTR in read_only() is not supported yet.",
            "R1 invalid mem access 'mem_or_null'",
            "accepted",
            "accepted",
            "accepted",
        ]
    );
}

const TAIL_CALL_WRITE: &str = "tests/data/kernels/tail_call_stack_write.o";

/// `computes_stack_liveness_before_the_walk`: a subprogram writes its caller's slot after a
/// tail call, which may leave it first. Every kernel before 7.2 takes the write as sure, so
/// the slot is dead across the call and the caller's path that set an out-of-frame offset in
/// it is pruned; 7.2's static liveness takes no write of a callee as killing its caller's
/// slot, walks that path and refuses its read. The control, with no tail call before
/// the write, is accepted everywhere.
#[test]
fn a_write_after_a_tail_call_is_not_sure_from_7_2() {
    let accepted = "accepted";
    assert_eq!(
        answers(TAIL_CALL_WRITE, "offset_left_by_a_tail_call"),
        [
            accepted,
            accepted,
            accepted,
            accepted,
            "invalid read from stack R2 off=-768 size=8"
        ]
    );
    assert_eq!(
        answers(TAIL_CALL_WRITE, "offset_always_rewritten"),
        [accepted; 5]
    );
}

/// may_goto (`can_loop`) is an instruction 5.10 and 6.1 do not know; the loop's counts on the
/// later kernels are in tests/kernel_counts.rs.
#[test]
fn may_goto_is_unknown_before_6_9() {
    assert_eq!(
        answers("tests/data/kernels/may_goto_linked_index.o", "fill_slots"),
        [
            "unknown opcode e5",
            "unknown opcode e5",
            "accepted",
            "accepted",
            "accepted"
        ]
    );
}

/// `carries_frameno_into_scalar_plus_pointer`: a subprogram's `scalar += r10` keeps the
/// scalar's frame number up to 6.18, so its store through the result is taken for one in the
/// caller's frame and the reload of its own slot for the map value it spilled; 7.2 gives the
/// pointer's frame and refuses the store through what the reload really gives.
#[test]
fn stack_pointer_arithmetic_keeps_its_frame_from_7_2() {
    assert_eq!(
        answers(
            "tests/data/kernels/frameno_stack_arith.o",
            "store_through_own_frame"
        ),
        [
            "accepted",
            "accepted",
            "accepted",
            "accepted",
            "R7 invalid mem access 'scalar'"
        ]
    );
}

const SCALAR_RULES: &str = "tests/data/kernels/scalar_rules_6_18.o";
const UNBOUNDED_OFFSET: &str =
    "math between map_value pointer and register with unbounded min value is not allowed";

/// The answers of a program 5.10, 6.1 and 6.12 refuse with `error` and 6.18 and 7.2 accept.
fn refused_up_to_6_12(error: &str) -> [&str; 5] {
    [error, error, error, "accepted", "accepted"]
}

/// `clobbers_stack_on_helper_reads`: up to 6.12 a lookup turns the key it read into unknown
/// data, so the zero reloaded from it is unbounded; from 6.18 it is still 0.
#[test]
fn a_lookup_leaves_its_key_alone_from_6_18() {
    assert_eq!(
        answers(SCALAR_RULES, "key_kept_by_lookup"),
        refused_up_to_6_12(UNBOUNDED_OFFSET)
    );
}

/// `tracks_negation_and_byte_swaps`: `be32` of 0 is unknown up to 6.12, 0 from 6.18.
#[test]
fn a_byte_swap_of_a_constant_is_known_from_6_18() {
    assert_eq!(
        answers(SCALAR_RULES, "byte_swap_of_zero"),
        refused_up_to_6_12(UNBOUNDED_OFFSET)
    );
}

/// `collapses_single_member_ranges`: `r &= 8` proven nonzero is 8 from 6.18; up to 6.12 it
/// stays [1, 8], and the offset computed from it may be negative.
#[test]
fn a_range_with_one_tnum_member_is_that_constant_from_6_18() {
    let negative =
        "R0 min value is negative, either use unsigned index or do a if (index >=0) check.";
    assert_eq!(
        answers(SCALAR_RULES, "single_member_range"),
        refused_up_to_6_12(negative)
    );
}
