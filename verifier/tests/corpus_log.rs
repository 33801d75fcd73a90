//! The example corpus's verifier logs at level 2, line for line against the running kernel's
//! (libbpf loads each object): equal for every program except those listed in `LOGS_DIFFER`
//! with the reason, which must still differ, so that the list only shrinks.
//!
//! Compared after one normalisation: the kernel's own addresses in `ld_imm64` lines (a map's
//! address; bpfemu prints 0) become `ADDR`; the `verification time` line is left out. 6.18's
//! stack-liveness trace (`(0) frame 0 insn 6 +written -8`, `live stack update done`) is
//! compared with the rest.
//!
//! Skipped with a message when bpf() is out of reach, unless `BPFEMU_REQUIRE_KERNEL=1`.

use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions, kernel_or_skip};
use bpfemu_kernel::{BPF_LOG_LEVEL2, BPF_LOG_STATS};
use bpfemu_verifier::{Options, ProgramInput, verify};
use std::path::Path;

/// Programs (`OBJECT/PROGRAM`) whose level-2 log differs from the kernel's, and why.
const LOGS_DIFFER: &[(&str, &str)] = &[];

/// A log's lines as compared.
fn normalised(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| !l.starts_with("verification time"))
        .map(|l| {
            let l = l.trim_end();
            match (l.find("(18) r"), l.find(" = 0x")) {
                (Some(_), Some(at)) => {
                    let rest = &l[at + 5..];
                    let end = rest
                        .find(|c: char| !c.is_ascii_hexdigit())
                        .unwrap_or(rest.len());
                    format!("{} = ADDR {}", &l[..at], rest[end..].trim_start())
                }
                _ => l.to_owned(),
            }
        })
        .collect()
}

#[test]
fn corpus_level2_logs_match_the_kernel() {
    if !kernel_or_skip("corpus_level2_logs_match_the_kernel") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xdp/build");
    let mut objects: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus is built")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    let (mut equal, mut total) = (0, 0);
    let mut problems = Vec::new();
    for path in objects {
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("utf-8");
        // Objects libbpf 1.x cannot open (legacy `maps` sections) are judged elsewhere.
        let Ok(mut kernel) = LibbpfObject::open_file(&path) else {
            continue;
        };
        let loaded = kernel.load(&LogOptions {
            level: BPF_LOG_LEVEL2 | BPF_LOG_STATS,
            size: 256 << 20,
        });
        let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
        for k in &loaded.programs {
            let Some(prog) = obj.programs.iter().find(|p| p.name == k.name) else {
                continue;
            };
            let ours = verify(
                &ProgramInput::new(&obj, prog),
                &Options {
                    log_level: BPF_LOG_LEVEL2 | BPF_LOG_STATS,
                    ..Options::default()
                },
            );
            let name = format!("{stem}/{}", prog.name);
            let (expected, got) = (normalised(&k.log), normalised(&ours.log));
            total += 1;
            let listed = LOGS_DIFFER.iter().any(|(n, _)| *n == name);
            match (expected == got, listed) {
                (true, false) => equal += 1,
                (false, true) => {}
                (true, true) => problems.push(format!("{name}: listed, but the logs agree now")),
                (false, false) => {
                    let at = expected
                        .iter()
                        .zip(&got)
                        .position(|(a, b)| a != b)
                        .unwrap_or(expected.len().min(got.len()));
                    problems.push(format!(
                        "{name}: logs differ from line {}\n kernel: {:?}\n bpfemu: {:?}",
                        at + 1,
                        expected.get(at),
                        got.get(at)
                    ));
                }
            }
        }
    }
    println!("level-2 logs equal for {equal} of {total} programs");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
