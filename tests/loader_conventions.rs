//! Objects whose programs libbpf's rule (one program per global function symbol) does not
//! find, loaded as the loaders that accept them do: a section without function symbols is one
//! program named by its section (iproute2's legacy loader, the old samples/bpf loader), a
//! `static` function in a program section is a program (cilium/ebpf). `inspect` says which
//! convention made each program; `verify`, `replay` and `diff` work on them, and the kernel,
//! given the same code through bpf(), agrees.
//!
//! The objects are in `tests/data/conventions/` (sources beside them, with how each was built).
//! Kernel tests are skipped with a message when bpf() is out of reach, unless
//! `BPFEMU_REQUIRE_KERNEL=1`.

#[allow(dead_code)]
mod cli_support;

use bpfemu_loader::{LoadOptions, Naming, Object};
use cli_support::{assert_exit, bpfemu, kernel_or_skip, root, stderr, stdout};

const DIR: &str = "tests/data/conventions";

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

/// Loads an object as `ip ... xdp obj FILE` would: sections that name no type are XDP.
fn load(name: &str) -> Object {
    let opts = LoadOptions {
        untyped_prog_type: Some(bpfemu_isa::uapi::BPF_PROG_TYPE_XDP),
        ..LoadOptions::default()
    };
    bpfemu_loader::load_file(&root().join(path(name)), &opts).unwrap()
}

fn names_and_namings(obj: &Object) -> Vec<(&str, &str, Naming)> {
    let programs = obj.programs.iter();
    programs
        .map(|p| (p.name.as_str(), p.section.as_str(), p.naming))
        .collect()
}

/// Stripping the entry symbols changes the names (sections now) and nothing else: the same
/// code, the same subprogram appended from .text, the same map reference, func_info and
/// line_info as libbpf makes of the object before stripping.
#[test]
fn stripped_sections_are_the_programs_libbpf_made_before_stripping() {
    let stripped = load("named_by_section.o");
    let full = load("named_by_section.full.o");
    use Naming::*;
    assert_eq!(
        names_and_namings(&stripped),
        [
            ("xdp", "xdp", SectionWithoutSymbols),
            ("prog", "prog", SectionWithoutSymbols)
        ]
    );
    assert_eq!(
        names_and_namings(&full),
        [
            ("count_protocols", "xdp", FunctionSymbol),
            ("drop_short", "prog", FunctionSymbol)
        ]
    );
    for (s, f) in stripped.programs.iter().zip(&full.programs) {
        assert_eq!(s.insns, f.insns, "{}", s.name);
        assert_eq!(s.func_info, f.func_info, "{}", s.name);
        assert_eq!(s.line_info, f.line_info, "{}", s.name);
        assert_eq!(s.functions[1..], f.functions[1..], "{}", s.name);
        assert!(!s.line_info.is_empty(), "{}", s.name);
    }
    let xdp = &stripped.programs[0];
    assert_eq!(xdp.functions[1].0, "proto_slot");
    assert_eq!(xdp.func_info.len(), 2);
}

/// Static programs, each with what it calls: `drop_runts` calls `long_enough` of its own
/// section (no relocation), `count_ipv4` the static `is_ipv4` of .text.
#[test]
fn static_functions_are_programs_as_cilium_ebpf_makes_them() {
    let obj = load("static_programs.o");
    use Naming::StaticFunction;
    assert_eq!(
        names_and_namings(&obj),
        [
            ("long_enough", "xdp", StaticFunction),
            ("count_ipv4", "xdp", StaticFunction),
            ("drop_runts", "xdp", StaticFunction)
        ]
    );
    let prog = |name: &str| obj.programs.iter().find(|p| p.name == name).unwrap();
    let runts = prog("drop_runts");
    assert_eq!(
        runts.functions,
        [("drop_runts".to_owned(), 0), ("long_enough".to_owned(), 2)]
    );
    // The call at 0 lands on long_enough, appended at 2, and long_enough is copied whole.
    assert_eq!((runts.insns[0].code, runts.insns[0].imm), (0x85, 1));
    assert_eq!(runts.insns[2..], prog("long_enough").insns[..]);
    assert_eq!(runts.func_info.len(), 2);
    let ipv4 = prog("count_ipv4");
    assert_eq!(ipv4.functions[1].0, "is_ipv4");
    assert_eq!(
        (ipv4.func_info.len(), ipv4.line_info.is_empty()),
        (2, false)
    );
    assert!(
        obj.warnings
            .iter()
            .any(|w| w.contains("'long_enough', 'count_ipv4', 'drop_runts' are static")),
        "{:?}",
        obj.warnings
    );
}

/// No symbol table at all: each executable section is one program, kept as it is (the call
/// inside `xdp` still points 5 instructions on), empty `.text` ignored.
#[test]
fn without_a_symbol_table_each_section_is_one_program() {
    let obj = load("hand_written.o");
    use Naming::SectionWithoutSymbols;
    assert_eq!(
        names_and_namings(&obj),
        [
            ("xdp", "xdp", SectionWithoutSymbols),
            ("prog", "prog", SectionWithoutSymbols)
        ]
    );
    let xdp = &obj.programs[0];
    assert_eq!(xdp.insns.len(), 13);
    assert_eq!(
        (xdp.insns[0].code, xdp.insns[0].src, xdp.insns[0].imm),
        (0x85, 1, 5)
    );
    assert_eq!(xdp.functions, [("xdp".to_owned(), 0)]);
    assert!(obj.programs.iter().all(|p| p.prog_type == 6));
}

/// `inspect` says which convention made each program, in text and in JSON; an object libbpf
/// loads says libbpf's.
#[test]
fn inspect_names_the_convention_of_each_program() {
    let cases = [
        (
            "static_programs.o",
            "static function (as cilium/ebpf loads it)",
            "static_function",
        ),
        (
            "hand_written.o",
            "a section without symbols, named by its section (iproute2)",
            "section_without_symbols",
        ),
        (
            "named_by_section.full.o",
            "named by its function symbol (libbpf)",
            "function_symbol",
        ),
    ];
    for (object, text, key) in cases {
        let out = bpfemu(&["inspect", &path(object)]);
        assert_exit(&out, 0);
        let shown = stdout(&out);
        let conventions: Vec<&str> = shown
            .lines()
            .filter_map(|l| l.trim().strip_prefix("convention: "))
            .collect();
        assert!(!conventions.is_empty(), "{shown}");
        assert!(conventions.iter().all(|c| *c == text), "{shown}");
        let out = bpfemu(&["inspect", &path(object), "--json"]);
        assert_exit(&out, 0);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for p in doc["programs"].as_array().unwrap() {
            assert_eq!(p["naming"], key, "{p:#}");
            assert_eq!(p["naming_convention"], text, "{p:#}");
        }
    }
}

/// Two programs in one section, stripped: one program of both (the second unreachable), and
/// func_info, which names two functions where the code has one, is left out as iproute2
/// leaves it, so that the kernel judges the code ("unreachable insn 2"), as bpfemu does.
#[test]
fn a_section_of_two_functions_is_one_program_without_func_info() {
    let obj = load("two_in_one.o");
    let xdp = &obj.programs[..];
    assert_eq!((xdp.len(), xdp[0].name.as_str()), (1, "xdp"));
    assert!(xdp[0].func_info.is_empty());
    assert_eq!(xdp[0].line_info.len(), 2);
    assert!(
        obj.warnings
            .iter()
            .any(|w| w.contains("func_info names 2 functions but the section's calls start 1")),
        "{:?}",
        obj.warnings
    );
    let out = bpfemu(&["verify", &path("two_in_one.o")]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains("two_in_one.o: error: xdp: unreachable insn 2"),
        "{}",
        stdout(&out)
    );
    if !kernel_or_skip("a_section_of_two_functions_is_one_program_without_func_info") {
        return;
    }
    let out = bpfemu(&["diff", "--verifier", &path("two_in_one.o"), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &doc["programs"][0];
    assert_eq!(p["agree"], true, "{p:#}");
    assert_eq!(p["kernel"]["error"], "unreachable insn 2", "{p:#}");
}

/// bpfemu's verifier accepts every program, picked by function or section name.
#[test]
fn verify_accepts_each_program_by_its_name() {
    for (object, prog) in [
        ("hand_written.o", "xdp"),
        ("hand_written.o", "prog"),
        ("named_by_section.o", "xdp"),
        ("named_by_section.o", "prog"),
        ("static_programs.o", "count_ipv4"),
        ("static_programs.o", "drop_runts"),
    ] {
        let out = bpfemu(&["verify", &path(object), "--prog", prog, "--json"]);
        assert_exit(&out, 0);
        let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let programs = doc["programs"].as_array().expect("programs");
        assert!(
            !programs.is_empty()
                && programs
                    .iter()
                    .all(|p| (p["name"] == prog || p["section"] == prog)
                        && p["verdict"] == "accepted"),
            "{doc:#}"
        );
    }
}

/// Bad code in a section without symbols: one line naming the file and the place, exit 2.
#[test]
fn bad_sections_are_one_line_errors() {
    for (object, place) in [
        (
            "bad_code.o",
            "section 'xdp.frags': program '*': section size 12 is not a multiple of 8",
        ),
        (
            "bad_call.o",
            "program 'xdp': instruction 0: call into xdp instruction 101, where no function is",
        ),
    ] {
        for command in ["inspect", "verify"] {
            let out = bpfemu(&[command, &path(object)]);
            assert_exit(&out, 2);
            let err = stderr(&out);
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.contains(&format!("{}: {place}", path(object))), "{err}");
        }
    }
}

/// The kernel, given the same programs, accepts what bpfemu accepts, every one.
#[test]
fn kernel_verifier_agrees_on_every_program() {
    if !kernel_or_skip("kernel_verifier_agrees_on_every_program") {
        return;
    }
    for (object, count) in [
        ("hand_written.o", 2),
        ("named_by_section.o", 2),
        ("static_programs.o", 3),
    ] {
        let out = bpfemu(&["diff", "--verifier", &path(object), "--json"]);
        assert_exit(&out, 0);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let programs = doc["programs"].as_array().unwrap();
        assert_eq!(programs.len(), count, "{doc:#}");
        for p in programs {
            assert_eq!(p["agree"], true, "{p:#}");
            assert_eq!(p["kernel"]["accepted"], true, "{p:#}");
        }
    }
}

/// Packets and maps: bpfemu and the kernel run each convention's programs to the same
/// results, and `replay` runs them too.
#[test]
fn packets_and_maps_match_the_kernel() {
    if !kernel_or_skip("packets_and_maps_match_the_kernel") {
        return;
    }
    let capture = "examples/pcap/normal.pcap";
    for (object, prog, map) in [
        ("hand_written.o", "xdp", None),
        ("named_by_section.o", "xdp", Some("protocols")),
        ("static_programs.o", "count_ipv4", Some("seen")),
        ("static_programs.o", "drop_runts", None),
    ] {
        let out = bpfemu(&["diff", &path(object), capture, "--prog", prog, "--json"]);
        assert_exit(&out, 0);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["summary"]["mismatches"], 0, "{report:#}");
        if let Some(name) = map {
            let maps = report["maps"].as_array().unwrap();
            let m = maps.iter().find(|m| m["name"] == name).unwrap();
            assert_eq!(m["compared"], true, "{m:#}");
            assert_eq!(m["kernel_entries"], m["equal_entries"], "{m:#}");
        }
        let out = bpfemu(&["replay", &path(object), capture, "--prog", prog, "--json"]);
        assert_exit(&out, 0);
        assert!(
            stdout(&out).contains("\"action\":\"pass\""),
            "{}",
            stdout(&out)
        );
    }
}

/// A pinning value libbpf does not know: in an object of static programs (cilium/ebpf's
/// convention, Cilium's `CILIUM_PIN_REPLACE`) a warning and the map unpinned, so the object
/// verifies; in a libbpf object the error libbpf 1.7 gives ("map 'calls': invalid pinning
/// value 16.", its open refusing the object), naming the file and the map.
#[test]
fn a_pinning_value_of_another_loader_is_refused_only_where_libbpf_would_load() {
    let obj = load("foreign_pinning.o");
    let calls = obj.maps.iter().find(|m| m.name == "calls").unwrap();
    assert_eq!(calls.pinning, 0);
    assert!(
        obj.warnings
            .iter()
            .any(|w| w.contains("'calls' (16)") && w.contains("not pinned")),
        "{:?}",
        obj.warnings
    );
    let out = bpfemu(&["verify", &path("foreign_pinning.o")]);
    assert_exit(&out, 0);
    let out = bpfemu(&["verify", &path("foreign_pinning.libbpf.o")]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("foreign_pinning.libbpf.o")
            && err.contains("map 'calls': invalid pinning value 16"),
        "{err}"
    );
}
