//! libbpf 1.7's rewrite of the verifier's complaint about an instruction it poisoned (an
//! unresolved weak kfunc, a CO-RE relocation with no target) against bpfemu's: the fixture
//! `tests/data/verifier/libbpf_poisoned.o` is loaded program by program with libbpf itself,
//! and the lines libbpf wrote into the log must be bpfemu's verdict message and log lines.

use bpfemu_conformance::libbpf::{self, LibbpfObject, LogOptions};
use bpfemu_loader::LoadOptions;
use bpfemu_verifier::Options;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/verifier/libbpf_poisoned.o")
}

/// libbpf's log of `name`'s load, the fixture's other programs not loaded.
fn libbpf_log(name: &str, all: &[String]) -> (bool, String) {
    let mut obj = LibbpfObject::open_file(&fixture()).expect("libbpf opens the fixture");
    for other in all.iter().filter(|n| *n != name) {
        obj.set_autoload(other, false).expect("autoload");
    }
    let out = obj.load(&LogOptions::default());
    let prog = out
        .programs
        .iter()
        .find(|p| p.name == name)
        .expect("loaded");
    (prog.loaded, prog.log.clone())
}

/// The lines libbpf put in place of the poisoned instruction and the complaint.
fn rewritten_lines(log: &str) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().collect();
    let Some(at) = lines.iter().position(|l| l.contains(": <invalid ")) else {
        return Vec::new();
    };
    lines[at..(at + 2).min(lines.len())].to_vec()
}

#[test]
fn poisoned_calls_read_as_libbpf_rewrites_them() {
    if !libbpf::kernel_or_skip("poisoned_calls_read_as_libbpf_rewrites_them") {
        return;
    }
    let obj = bpfemu_loader::load_file(&fixture(), &LoadOptions::default()).expect("loads");
    let names: Vec<String> = obj.programs.iter().map(|p| p.name.clone()).collect();
    let opts = Options {
        log_level: 1,
        ..Options::default()
    };
    let mut rewritten = 0;
    for program in &obj.programs {
        let (loaded, log) = libbpf_log(&program.name, &names);
        let ours = bpfemu::verify::judge(&obj, program, &opts);
        assert_eq!(ours.is_accepted(), loaded, "{}: verdict", program.name);
        if loaded {
            continue;
        }
        let theirs = bpfemu_kernel::verifier_error_line(&log);
        let message = &ours.rejection().expect("rejected").message;
        assert_eq!(message, &theirs, "{}: final line", program.name);
        let lines = rewritten_lines(&log);
        assert_eq!(
            lines.len(),
            2,
            "{}: libbpf rewrote nothing:\n{log}",
            program.name
        );
        assert_eq!(rewritten_lines(&ours.log), lines, "{}: log", program.name);
        rewritten += 1;
    }
    // A kfunc call, a field offset and an enumerator value.
    assert_eq!(rewritten, 3);
}
