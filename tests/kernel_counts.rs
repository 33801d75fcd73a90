//! Processed counts as each kernel gives them, where the verifier's code changed between
//! versions (`verifier/src/behaviour.rs`). Each fixture in `tests/data/kernels/` isolates one
//! behaviour switch; the expected counts are what those kernels printed for it, booted under
//! QEMU with libbpf 1.7 (`bpfemu-kernel-vms`): Debian's 5.10.0-32, 6.1.0-47, 6.12.95+deb12
//! and 7.2.12+deb14 cloud kernels, and this machine's 6.18.44.

mod kernel_csv;

use kernel_csv::{KERNELS, verify_csv};

/// `verify OBJECT --kernel` every profile, as CSV: the processed count per kernel, in
/// [`KERNELS`] order.
fn processed_per_kernel(object: &str) -> Vec<u64> {
    processed_on(object, &KERNELS)
}

/// The processed count `verify OBJECT --kernel` gives for each of `kernels`, in their order.
fn processed_on(object: &str, kernels: &[&str]) -> Vec<u64> {
    let csv = verify_csv(object, kernels);
    assert_eq!(csv.status, Some(0), "{}", csv.text);
    kernels
        .iter()
        .map(|k| {
            csv.row(k, |r| r["kernel"] == *k)["total_insns"]
                .parse()
                .expect("a count")
        })
        .collect()
}

/// `elides_array_lookup_nullness`: the NULL side of the check after an array lookup by key 0
/// is walked by 5.10, 6.1 and 6.12 (30 instructions), not from 6.14 on (17).
#[test]
fn a_constant_key_array_lookup_is_null_checked_before_6_14() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/array_lookup_null_check.o"),
        [30, 30, 30, 17, 17]
    );
}

/// `maps_lock_ids_in_states_equal`: a second path into a `bpf_spin_lock` region, with a lock
/// id of its own, is pruned inside it from 6.7 on (98) and walked again by 5.10 and 6.1 (118).
#[test]
fn a_lock_taken_on_a_second_path_is_pruned_from_6_7() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/lock_on_two_paths.o"),
        [118, 118, 98, 98, 98]
    );
}

/// `spills_zero_and_unbounded_scalars`: a zero and a packet byte meeting at one stack store
/// are one state from 6.8 on (41), two for 5.10 and 6.1 (51), whose zero is `STACK_ZERO`
/// with a precise register.
#[test]
fn a_zero_spilled_to_the_stack_is_precise_before_6_8() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/zero_spill_join.o"),
        [51, 51, 41, 41, 41]
    );
}

/// `iterates_sync_callbacks`: 6.1 walks a `bpf_loop` callback once (47); from 6.7 on it is a
/// loop body walked until its states converge (250). 5.10 has no `bpf_loop` to count.
#[test]
fn a_bpf_loop_callback_is_walked_once_before_6_7() {
    assert_eq!(
        processed_on("tests/data/kernels/loop_callback.o", &KERNELS[1..]),
        [47, 250, 250, 250]
    );
}

/// `compares_stack_scalars_as_registers`: a key slot spilled on one path and written as two
/// u32 halves on the other is one state from 6.8 on (44), two for 5.10 and 6.1 (53).
#[test]
fn a_spilled_slot_differs_from_plain_bytes_before_6_8() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/misc_vs_spill.o"),
        [53, 53, 44, 44, 44]
    );
}

/// `bounds_bitwise_ops_of_unknown_scalars`: `(a << 2) | (b & 3)` of two packet bytes is at
/// most 1023 from 6.10 on and a branch past 2000 is dead (23); 5.10 and 6.1 walk it (36).
#[test]
fn an_or_of_two_unknown_scalars_is_unbounded_before_6_10() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/or_of_unknowns.o"),
        [36, 36, 23, 23, 23]
    );
}

/// `forks_zero_or_minus_one_scalars`: `(v s>> 63) & 5` is walked as 0 and as 5 by Debian's
/// 6.12 and later, so a test for 1 is dead (26); 5.10 and 6.1 walk it (35).
#[test]
fn a_sign_mask_is_one_range_before_6_12() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/sign_mask.o"),
        [35, 35, 26, 26, 26]
    );
}

/// `bounds_div_mod_by_constant`: a packet byte divided by 3 plus another modulo 10 is at most
/// 94 for 7.2 and a branch past 2000 is dead (23); up to 6.18 a division or modulo gives an
/// unknown scalar and that branch is walked (36).
#[test]
fn a_division_by_a_constant_is_unbounded_before_7_2() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/div_mod_of_packet.o"),
        [36, 36, 36, 36, 23]
    );
}

/// `prunes_linked_scalars_against_independent_ones`: a may_goto loop's index returns to the
/// loop's head with a constant-offset link the checkpoint's index (no id) lacks. 6.18 and 7.2
/// prune that first return (18 instructions); Debian's 6.12.95 walks the body once more (29).
/// 5.10 and 6.1 refuse may_goto itself (tests/kernel_verdicts.rs has their words).
#[test]
fn an_independent_index_prunes_a_linked_one_from_6_18() {
    assert_eq!(
        processed_on(
            "tests/data/kernels/may_goto_linked_index.o",
            &["6.12", "6.18", "7.2"]
        ),
        [29, 18, 18]
    );
}

/// `backtracks_precision_through_calls`: a constant compared after a call needs precision;
/// 5.10 and 6.1 give up at the callee's exit and make every scalar of the checkpoints above the
/// call's precise, so the second path (another r7) is not pruned at the join and walks on to
/// the return from the call (44); from 6.4 only r8 is precise and that path is pruned at the
/// join (36).
#[test]
fn precision_stops_at_a_call_before_6_4() {
    assert_eq!(
        processed_per_kernel("tests/data/kernels/precision_past_call.o"),
        [44, 44, 36, 36, 36]
    );
}

/// `computes_stack_liveness_before_the_walk`: the corpus' l4lb is 1429 instructions on 6.18,
/// whose walk-recorded liveness cleans a checkpoint only once its paths are done, and 1423 on
/// 7.2, whose checkpoints are born clean of the slots its static pass finds dead.
#[test]
fn stack_slots_are_live_by_a_static_pass_from_7_2() {
    assert_eq!(
        processed_on("examples/xdp/build/l4lb.v2.o", &["6.18", "7.2"]),
        [1429, 1423]
    );
}
