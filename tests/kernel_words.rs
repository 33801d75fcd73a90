//! Verdicts and final error lines as 6.18 and 7.2 give them, where a behaviour switch
//! (`verifier/src/behaviour.rs`) changed a verdict or only the words. The fixtures are in
//! `tests/data/kernels/`; the expected answers are what this machine's 6.18.44 and Debian's
//! 7.2.12+deb14 cloud kernel (booted under QEMU with libbpf 1.7, `scripts/kernel_vms.sh`)
//! printed for them.

use std::process::Command;

/// `verify OBJECT --kernel 6.18,7.2 --json`: the final error line of `program` as 6.18 and
/// as 7.2, in that order, each `None` when that kernel accepts it.
fn answers_as_6_18_and_7_2(object: &str, program: &str) -> [Option<String>; 2] {
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(["verify", object, "--kernel", "6.18,7.2", "--json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bpfemu runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdicts: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    let programs = verdicts["programs"].as_array().expect("a list of programs");
    let answers = &programs
        .iter()
        .find(|p| p["name"] == program)
        .unwrap_or_else(|| panic!("no {program} in {stdout}"))["kernels"];
    let error_as = |kernel: &str| -> Option<String> {
        let answer = &answers[kernel];
        match answer["verdict"].as_str() {
            Some("accepted") => None,
            Some("rejected") => Some(answer["error"].as_str().expect("an error line").to_owned()),
            _ => panic!("neither accepted nor rejected: {answer}"),
        }
    };
    [error_as("6.18"), error_as("7.2")]
}

/// As [`answers_as_6_18_and_7_2`] for a program both kernels refuse.
fn errors_as_6_18_and_7_2(object: &str, program: &str) -> [String; 2] {
    answers_as_6_18_and_7_2(object, program).map(|e| e.expect("refused"))
}

/// `infers_null_from_a_null_register`: 7.2 takes `if r0 == r1` with r1 zero as a NULL check.
#[test]
fn a_compare_with_a_zero_register_is_a_null_check_from_7_2() {
    assert_eq!(
        answers_as_6_18_and_7_2(
            "tests/data/kernels/null_register_compare.o",
            "lookup_against_zero_register"
        ),
        [
            Some("R0 invalid mem access 'map_value_or_null'".to_owned()),
            None
        ]
    );
}

/// `words_sleeping_calls_by_context`: 7.2 names the helper that may sleep and where.
#[test]
fn a_sleeping_helper_is_refused_naming_it_from_7_2() {
    assert_eq!(
        errors_as_6_18_and_7_2(
            "tests/data/kernels/null_register_compare.o",
            "copy_from_user_in_xdp"
        ),
        [
            "helper call might sleep in a non-sleepable prog",
            "sleepable helper bpf_copy_from_user#148 in non-sleepable prog",
        ]
    );
}

/// `passes_ctx_as_helper_memory`: 7.2's helper memory arguments take a context, which an
/// XDP program may not pass there; 6.18's list has no `ctx`.
#[test]
fn the_context_as_helper_memory_is_refused_in_7_2_words() {
    let object = "tests/data/kernels/ctx_as_helper_memory.o";
    assert_eq!(
        errors_as_6_18_and_7_2(object, "csum_of_ctx"),
        [
            "R1 type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_",
            "R1 type=ctx expected=fp",
        ]
    );
    assert_eq!(
        errors_as_6_18_and_7_2(object, "csum_of_moved_ctx"),
        [
            "R1 type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_",
            "dereference of modified ctx ptr R1 off=4 disallowed",
        ]
    );
}

/// `words_pointer_offset_as_one`: a pointer's fixed offset is printed apart by 6.18 and as
/// part of its one offset by 7.2, and decides there whether its minimum is negative.
#[test]
fn a_pointers_fixed_offset_is_part_of_its_offset_in_7_2_words() {
    let object = "tests/data/kernels/pointer_offset_words.o";
    assert_eq!(
        errors_as_6_18_and_7_2(object, "misaligned_stack_load"),
        [
            "misaligned stack access off 0+-8+2 size 8",
            "misaligned stack access off -8+2 size 8",
        ]
    );
    assert_eq!(
        errors_as_6_18_and_7_2(object, "map_value_below_start"),
        [
            "R0 min value is outside of the allowed memory range",
            "R0 min value is negative, either use unsigned index or do a if (index >=0) check.",
        ]
    );
}
