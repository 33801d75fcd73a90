//! Diagnostics that say why (`bpfemu verify`, `--explain`): for each class of rejection in
//! `tests/data/explain/explain.c` the note and the path name the instruction where the fact
//! that failed was established or lost, at its source line; the kernel's lines quoted under
//! the error are the running kernel's own; and recording the path changes nothing the
//! verifier reports.

#[allow(dead_code)]
mod cli_support;

use bpfemu_kernel::kernel_or_skip;
use bpfemu_kernel::object::{KernelLoadOptions, KernelObject, KernelObjectError};
use bpfemu_verifier::{Options, ProgramInput, verify};
use cli_support::{bpfemu, root, stderr, stdout};
use serde_json::Value;
use std::path::PathBuf;

fn object() -> PathBuf {
    root().join("tests/data/explain/explain.o")
}

/// The line number of the one source line of explain.c that contains `needle`.
fn line_of(needle: &str) -> u32 {
    let src = std::fs::read_to_string(root().join("tests/data/explain/explain.c")).unwrap();
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{needle}: {hits:?}");
    hits[0] as u32
}

/// `verify --json --explain` of one program: exit 1 and its report.
fn explained(prog: &str) -> Value {
    let out = bpfemu(&[
        "verify",
        object().to_str().unwrap(),
        "--prog",
        prog,
        "--json",
        "--explain",
    ]);
    assert_eq!(out.status.code(), Some(1), "{prog}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    doc["programs"][0].clone()
}

/// One class: the note at `insn`, on the line holding `line`, says `words`; the path shows
/// `insn` and ends at the failing instruction.
fn assert_cause(prog: &str, insn: u64, line: &str, words: &str) -> Value {
    let p = explained(prog);
    let explanation = &p["explanation"];
    let notes = explanation["notes"].as_array().expect("notes");
    let note = notes
        .iter()
        .find(|n| n["insn"] == insn)
        .unwrap_or_else(|| panic!("{prog}: no note at insn {insn}: {p:#}"));
    assert_eq!(note["source"]["line"], line_of(line), "{prog}: {note:#}");
    assert!(
        note["message"].as_str().unwrap().contains(words),
        "{prog}: {note:#}"
    );
    let path = explanation["path"].as_array().expect("path");
    assert!(path.iter().any(|s| s["insn"] == insn), "{prog}: {path:#?}");
    assert_eq!(path.last().unwrap()["insn"], p["insn"], "{prog}: {path:#?}");
    p
}

#[test]
fn packet_bounds_are_traced_to_the_branch_that_proved_the_range() {
    let p = assert_cause(
        "packet_bounds",
        5,
        "if (data + 14 > end)",
        "packet range r=14 was proved by the branch at insn 5",
    );
    assert_eq!(
        p["explanation"]["log_lines"],
        serde_json::json!([
            "invalid access to packet, off=23 size=1, R1(id=0,off=23,r=14)",
            "R1 offset is outside of the packet"
        ]),
        "{p:#}"
    );
    // The path holds where R1 became a packet pointer and the branch, with its state.
    let path = p["explanation"]["path"].as_array().unwrap();
    let states: Vec<(u64, &str)> = path
        .iter()
        .map(|s| (s["insn"].as_u64().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert!(states.contains(&(2, "R1=pkt(r=0)")), "{states:?}");
    // The branch the note names shows every register it refined: R1 and the pointer it
    // compared.
    assert!(
        states.contains(&(5, "not taken: R1=pkt(r=14) R3=pkt(off=14,r=14)")),
        "{states:?}"
    );
    assert_eq!(states.last(), Some(&(6, "error with R1=pkt(r=14)")));
}

#[test]
fn a_null_check_missing_is_traced_to_the_helper_that_may_return_null() {
    assert_cause(
        "null_check",
        6,
        "bpf_map_lookup_elem(&flows, &key)",
        "bpf_map_lookup_elem at insn 6",
    );
}

#[test]
fn an_unbounded_scalar_is_traced_to_the_load_that_made_it() {
    assert_cause(
        "unbounded_index",
        10,
        "__u64 index = *(__u64 *)s;",
        "R2 is unbounded (any 64-bit value) since insn 10",
    );
}

#[test]
fn a_bound_lost_is_traced_to_the_arithmetic_that_lost_it() {
    let p = assert_cause(
        "negative_index",
        13,
        "long at = (long)index",
        "possibly negative",
    );
    // Where the bound held before it was lost: the mask, on the path.
    let path = p["explanation"]["path"].as_array().unwrap();
    assert!(path.iter().any(|s| s["insn"] == 12), "{path:#?}");
}

#[test]
fn an_uninitialised_stack_slot_is_named_with_the_pointer_to_it() {
    let p = assert_cause(
        "uninit_stack",
        5,
        "__u32 word = 0;",
        "R3 = fp-16 (the slot read) since insn 5",
    );
    let notes = p["explanation"]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n["insn"] == 9
            && n["message"]
                .as_str()
                .unwrap()
                .starts_with("fp-16 is read at insn 9, but no instruction on this path stores")),
        "{notes:#?}"
    );
}

/// "Too large" names the loop's back-edge and how many times the verifier walked it: the
/// loop adds 1 to i per walk from 0, so the walks are the constant i held at the error.
#[test]
fn too_large_names_the_loop_and_how_often_it_was_walked() {
    let p = assert_cause(
        "too_large",
        9,
        "for (__u32 i = 0; i < 1000000; i++)",
        "the loop from insn 3 back from insn 9 (`goto pc-7`) was walked ",
    );
    let note = p["explanation"]["notes"][0]["message"].as_str().unwrap();
    let walked: u64 = note
        .split("was walked ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count");
    // Each walk processes the 7 instructions 3..=9; the budget is 1,000,000.
    assert_eq!(walked, (1_000_000 - 3) / 7, "{note}");
    let path = p["explanation"]["path"].as_array().unwrap();
    let last = path.last().unwrap();
    assert!(
        last["state"].as_str().unwrap().starts_with("error"),
        "{last:#}"
    );
}

/// The default text places the error and each note as compilers do, with a caret under the
/// column line_info gives, and quotes the kernel's two lines.
#[test]
fn the_default_text_has_the_kernels_lines_a_caret_and_the_notes() {
    let out = bpfemu(&[
        "verify",
        object().to_str().unwrap(),
        "--prog",
        "packet_bounds",
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let access = line_of("return data[23] == 1");
    let check = line_of("if (data + 14 > end)");
    let expected_start = format!(
        "./explain.c:{access}:9: error: R1 offset is outside of the packet\n\
         \x20 {access:>5} | return data[23] == 1 ? XDP_DROP : XDP_PASS;\n\
         \x20       |        ^\n\
         \x20 insn 6: (71) r1 = *(u8 *)(r1 +23)\n\
         \x20 kernel log: invalid access to packet, off=23 size=1, R1(id=0,off=23,r=14)\n\
         \x20             R1 offset is outside of the packet\n\
         ./explain.c:{check}:6: note: R1's packet range r=14 was proved by the branch at insn 5 \
         (`if r3 > r2 goto pc+4`): only 14 bytes past the packet pointer it checked are known \
         to be there, and the access needs r>=24 [insn 5]\n\
         \x20 {check:>5} | if (data + 14 > end)\n\
         \x20       |     ^\n"
    );
    assert!(text.starts_with(&expected_start), "{text}");
    // The path only with --explain.
    assert!(!text.contains("path to the error"), "{text}");
    let out = bpfemu(&[
        "verify",
        object().to_str().unwrap(),
        "--prog",
        "packet_bounds",
        "--explain",
    ]);
    assert!(
        stdout(&out).contains("path to the error: 7 instructions, 3 shown"),
        "{}",
        stdout(&out)
    );
}

/// The lines quoted under each error are the last lines of the running kernel's level-1 log
/// for the same program (before its statistics), and its verdict line is bpfemu's message.
#[test]
fn the_quoted_lines_are_the_kernels() {
    if !kernel_or_skip("the_quoted_lines_are_the_kernels") {
        return;
    }
    let obj = bpfemu_loader::load_file(&object(), &Default::default()).expect("loads");
    let mut compared = 0;
    for prog in &obj.programs {
        if prog.name == "too_large" {
            // Its level-1 log is the whole million-instruction path; the verdict line is
            // compared by the corpus tests' way (diff --verifier) below.
            continue;
        }
        let opts = KernelLoadOptions {
            log_level: 1,
            log_size: 1 << 20,
            initial: Default::default(),
        };
        let log = match KernelObject::load(&obj, &prog.name, &opts) {
            Err(KernelObjectError::ProgLoad { log, .. }) => log,
            Err(e) => panic!("{}: {e}", prog.name),
            Ok(_) => panic!("{}: the kernel accepts it", prog.name),
        };
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| !l.is_empty())
            .take_while(|l| !l.starts_with("processed "))
            .collect();
        let p = explained(&prog.name);
        let quoted: Vec<String> =
            serde_json::from_value(p["explanation"]["log_lines"].clone()).unwrap();
        assert!(!quoted.is_empty(), "{}: {p:#}", prog.name);
        let kernel_tail = &lines[lines.len() - quoted.len()..];
        assert_eq!(kernel_tail, quoted.as_slice(), "{}:\n{log}", prog.name);
        assert_eq!(
            quoted.last().map(String::as_str),
            p["message"].as_str(),
            "{}",
            prog.name
        );
        compared += 1;
    }
    assert_eq!(compared, 5);
    let out = bpfemu(&["diff", "--verifier", object().to_str().unwrap(), "--json"]);
    let stdout = stdout(&out);
    assert!(!stdout.contains("\"agree\": false"), "{stdout}");
    assert!(stdout.contains("BPF program is too large"), "{stdout}");
}

/// The committed object is the one its committed source builds (rebuild both together).
#[test]
fn the_object_is_the_one_its_source_describes() {
    let src = std::fs::read_to_string(root().join("tests/data/explain/explain.c")).unwrap();
    let obj = bpfemu_loader::load_file(&object(), &Default::default()).expect("loads");
    let names: Vec<&str> = obj.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "packet_bounds",
            "null_check",
            "unbounded_index",
            "negative_index",
            "uninit_stack",
            "too_large"
        ]
    );
    for prog in &obj.programs {
        assert!(
            src.contains(&format!("int {}(", prog.name)),
            "{}",
            prog.name
        );
        for line in &prog.line_info {
            assert!(src.contains(line.line_text.trim()), "{line:?}");
        }
    }
}

/// Beyond these programs: every rejected program of the test objects (tests/data/verify,
/// tests/data/verifier) quotes the running kernel's last lines too.
#[test]
fn the_quoted_lines_are_the_kernels_on_every_rejected_test_object() {
    if !kernel_or_skip("the_quoted_lines_are_the_kernels_on_every_rejected_test_object") {
        return;
    }
    let mut objects: Vec<PathBuf> = ["tests/data/verify", "tests/data/verifier"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect("objects"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    let mut compared = 0;
    for path in objects {
        let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
        let out = bpfemu(&["verify", path.to_str().unwrap(), "--json"]);
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        for p in doc["programs"].as_array().unwrap() {
            let Some(quoted) = p["explanation"]["log_lines"].as_array() else {
                continue;
            };
            let name = p["name"].as_str().unwrap();
            let opts = KernelLoadOptions {
                log_level: 1,
                log_size: 1 << 20,
                initial: Default::default(),
            };
            let log = match KernelObject::load(&obj, name, &opts) {
                Err(KernelObjectError::ProgLoad { log, .. }) => log,
                other => panic!("{}: {name}: {:?}", path.display(), other.err()),
            };
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| !l.is_empty())
                .take_while(|l| !l.starts_with("processed "))
                .collect();
            let quoted: Vec<&str> = quoted.iter().map(|l| l.as_str().unwrap()).collect();
            assert!(
                lines.ends_with(&quoted),
                "{}: {name}:\n{log}",
                path.display()
            );
            compared += 1;
        }
    }
    assert!(compared >= 8, "{compared}");
}

/// Walking again with the path recorded gives the same verdict, log and counts, at every log
/// level, on the corpus and on these programs: the record only watches.
#[test]
fn recording_the_path_changes_nothing_the_verifier_reports() {
    let mut objects: Vec<PathBuf> = ["examples/xdp/build", "tests/data/verify"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect("objects built"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    objects.push(object());
    let mut judged = 0;
    for path in objects {
        let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
        for prog in &obj.programs {
            let input = ProgramInput::new(&obj, prog);
            // The million-instruction walk once, at the level `explain` walks it again.
            let levels: &[u32] = if prog.name == "too_large" {
                &[0]
            } else {
                &[0, 1, 2]
            };
            for &log_level in levels {
                let opts = Options {
                    log_level,
                    ..Options::default()
                };
                let plain = verify(&input, &opts);
                let (traced, _) = bpfemu_verifier::explore::run_traced(&input, &opts, 0);
                let name = format!("{}: {} (level {log_level})", path.display(), prog.name);
                assert_eq!(traced.outcome, plain.outcome, "{name}");
                assert_eq!(traced.log, plain.log, "{name}");
                let counts = |v: &bpfemu_verifier::Verdict| {
                    let s = &v.stats;
                    (
                        s.processed_insns,
                        s.total_states,
                        s.peak_states,
                        s.max_states_per_insn,
                        s.mark_read,
                        s.stack_depth.clone(),
                    )
                };
                assert_eq!(counts(&traced), counts(&plain), "{name}");
            }
            judged += 1;
        }
    }
    assert!(judged >= 60, "{judged}");
}
