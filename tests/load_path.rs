//! Rules of the load outside the verifier's walk, through the command line: the object's
//! license (GPL-only helpers and kfuncs) and the maps libbpf creates before any program. A
//! green `verify` means the kernel loads the object, so each is a rejection there, a refusal
//! to run it anywhere else, and the running kernel's own answer where it is in reach.
//!
//! Objects: `tests/data/load/*.c` (each says how it was built).

#[allow(dead_code)]
mod cli_support;

use cli_support::{
    assert_exit, bpfemu, example, kernel_or_skip, root, stderr, stdout, verdict_row,
};

fn object(name: &str) -> String {
    root()
        .join("tests/data/load")
        .join(name)
        .display()
        .to_string()
}

/// `diff --verifier --json` agrees with the kernel on every program, and the kernel rejects
/// the ones named.
fn kernel_agrees(obj: &str, rejected_by_kernel: &[&str]) {
    let out = bpfemu(&["diff", "--verifier", "--json", obj]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    for p in doc["programs"].as_array().expect("programs") {
        let name = p["program"].as_str().expect("name");
        assert_eq!(p["agree"], true, "{obj} {name}: {p}");
        let rejected = rejected_by_kernel.contains(&name);
        assert_eq!(p["kernel"]["accepted"], !rejected, "{obj} {name}: {p}");
    }
}

#[test]
fn a_gpl_only_helper_needs_a_gpl_compatible_license() {
    let obj = object("non_gpl.o");
    let out = bpfemu(&["verify", &obj]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("non_gpl.c:11:2: error: cannot call GPL-restricted function from non-GPL compatible program"),
        "{text}"
    );
    assert_eq!(verdict_row(&text, "passes"), Some("accepted"), "{text}");
    // Nothing runs the refused program; its sound neighbour still runs.
    let pcap = example("pcap/normal.pcap");
    let refused = bpfemu(&["replay", &obj, &pcap, "--prog", "prints"]);
    assert_exit(&refused, 1);
    assert!(
        stderr(&refused).contains("GPL-restricted"),
        "{}",
        stderr(&refused)
    );
    assert_exit(&bpfemu(&["replay", &obj, &pcap, "--prog", "passes"]), 0);
    if kernel_or_skip("a_gpl_only_helper_needs_a_gpl_compatible_license") {
        kernel_agrees(&obj, &["prints"]);
    }
}

#[test]
fn a_map_the_kernel_refuses_fails_the_object() {
    let obj = object("array_no_prealloc.o");
    let out = bpfemu(&["verify", &obj, "--json"]);
    assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let program = &doc["programs"][0];
    assert_eq!(program["verdict"], "rejected", "{doc}");
    assert_eq!(
        program["message"], "map 'counters': failed to create: -EINVAL",
        "{doc}"
    );
    assert!(
        program["note"]
            .as_str()
            .is_some_and(|n| n.contains("counters")),
        "{doc}"
    );
    let pcap = example("pcap/normal.pcap");
    for engine in ["interp", "jit", "jit-trusted"] {
        let run = bpfemu(&["replay", &obj, &pcap, "--engine", engine]);
        assert_exit(&run, 1);
    }
    if kernel_or_skip("a_map_the_kernel_refuses_fails_the_object") {
        kernel_agrees(&obj, &["count"]);
    }
}

#[test]
fn a_map_whose_btf_the_kernel_refuses_loses_its_special_fields() {
    let obj = object("btf_dropped.o");
    let out = bpfemu(&["verify", &obj]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert_eq!(
        verdict_row(&text, "lock_in_hash"),
        Some("accepted"),
        "{text}"
    );
    for line in [
        "error: map 'lru_locked' has to have BTF in order to use bpf_spin_lock",
        "error: map 'percpu_timed' has to have BTF in order to use bpf_timer",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    if kernel_or_skip("a_map_whose_btf_the_kernel_refuses_loses_its_special_fields") {
        kernel_agrees(&obj, &["lock_in_lru", "timer_in_percpu_array"]);
    }
}

/// BTF the kernel refuses in bytes libbpf sends as they are (a DATASEC's kind flag): libbpf
/// loads on without BTF, so the spin lock's map has none. `verify`, libbpf and the kernel
/// door of `diff --verifier` all refuse the program in the kernel's words; before, bpfemu
/// re-encoded the flag away and both said accepted.
#[test]
fn btf_the_kernel_refuses_as_libbpf_sends_it_is_dropped() {
    let obj = object("btf_datasec_flag.o");
    let words = "map 'counters' has to have BTF in order to use bpf_spin_lock";
    let out = bpfemu(&["verify", &obj]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(text.contains(&format!("error: {words}")), "{text}");
    if kernel_or_skip("btf_the_kernel_refuses_as_libbpf_sends_it_is_dropped") {
        assert_eq!(
            libbpf_verdict(&obj, "count_locked"),
            (false, words.to_owned())
        );
        kernel_agrees(&obj, &["count_locked"]);
    }
}

/// The running kernel's verdict on `program` of `obj` as libbpf 1.7 loads it (the other
/// programs not loaded): accepted, or the final error line of the log, or libbpf's last
/// warning when the kernel logged nothing (a map libbpf failed).
fn libbpf_verdict(obj: &str, program: &str) -> (bool, String) {
    use bpfemu_conformance::libbpf::{Level, LibbpfObject, LogOptions};
    let mut lib = LibbpfObject::open_file(std::path::Path::new(obj)).expect("libbpf opens it");
    for p in lib.programs() {
        lib.set_autoload(&p.name, p.name == program)
            .expect("autoload");
    }
    let out = lib.load(&LogOptions::default());
    let log = out.programs.iter().find(|p| p.name == program);
    if log.is_some_and(|p| p.loaded) {
        return (true, String::new());
    }
    let log = log.map(|p| p.log.clone()).unwrap_or_default();
    if !log.trim().is_empty() {
        return (false, bpfemu_kernel::verifier_error_line(&log));
    }
    let warning = out.messages.iter().rev().find(|m| m.level == Level::Warn);
    let text = warning.map_or("", |m| m.text.trim());
    (false, text.trim_start_matches("libbpf: ").to_owned())
}

/// A `bpf_spin_lock` among non-static global variables: libbpf maps the section's map into
/// memory, the kernel refuses to mmap() a map with a spin lock, and libbpf fails the object.
/// Hidden, the same lock is valid. bpfemu's verdicts and messages are libbpf's.
#[test]
fn a_global_spin_lock_libbpf_must_mmap_fails_the_object() {
    let exposed = object("global_lock.o");
    let out = bpfemu(&["verify", &exposed]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("map '.data.locked': failed to create: -ENOTSUPP"),
        "{text}"
    );
    let hidden = object("global_lock_hidden.o");
    let out = bpfemu(&["verify", &hidden]);
    assert_eq!(
        verdict_row(&stdout(&out), "count_under_lock"),
        Some("accepted"),
        "{}",
        stdout(&out)
    );
    if !kernel_or_skip("a_global_spin_lock_libbpf_must_mmap_fails_the_object") {
        return;
    }
    for obj in [&exposed, &hidden] {
        let out = bpfemu(&["verify", obj, "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        for p in doc["programs"].as_array().expect("programs") {
            let name = p["name"].as_str().expect("name");
            let ours = (
                p["accepted"] == true,
                p["message"].as_str().unwrap_or_default().to_owned(),
            );
            assert_eq!(ours, libbpf_verdict(obj, name), "{obj} {name}");
        }
    }
}

#[test]
fn a_large_btf_reaches_the_kernel_as_libbpf_loads_it() {
    let obj = object("big_btf_callback.o");
    let out = bpfemu(&["verify", &obj]);
    assert_exit(&out, 0);
    if kernel_or_skip("a_large_btf_reaches_the_kernel_as_libbpf_loads_it") {
        kernel_agrees(&obj, &[]);
    }
}

#[test]
fn egress_ifindex_is_read_only_by_devmap_programs() {
    let obj = object("attach_ctx.o");
    let out = bpfemu(&["verify", &obj, "--json"]);
    assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    for p in doc["programs"].as_array().expect("programs") {
        let name = p["name"].as_str().expect("name");
        let devmap = name.starts_with("egress_devmap");
        assert_eq!(p["accepted"], devmap, "{p}");
    }
    if kernel_or_skip("egress_ifindex_is_read_only_by_devmap_programs") {
        kernel_agrees(
            &obj,
            &[
                "egress_plain",
                "egress_frags",
                "egress_cpumap",
                "egress_cpumap_frags",
            ],
        );
    }
}
