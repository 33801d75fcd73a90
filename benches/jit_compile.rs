//! JIT compile time: every program of every corpus object (`examples/xdp/build`) compiled
//! by the Cranelift JIT, timed per object and as microseconds per 1,000 instructions (the
//! target is under 1 ms). Times are the thread's CPU time, so that the other processes of a
//! busy machine count less.
//!
//! `cargo bench --bench jit_compile` (release; `-- checked`, the default, `-- trusted`,
//! `-- baseline`: trusted code from the baseline compiler, `bpfemu_jit::Tier`, or
//! `-- baseline-checked`: checked code from it). For a
//! profile, `-- --repeat N NAME...` compiles only the objects whose file names contain one of
//! the NAMEs, N times each (`perf record -g` over it, built with debug info).

use bpfemu::jit::Engine;
use bpfemu::vm_runtime::build_runtime;
use bpfemu_kernel::thread_cpu_ns;
use bpfemu_loader::{LoadOptions, load_file};
use bpfemu_vm::xdp::XdpConfig;
use std::path::PathBuf;
use std::time::Duration;

/// Compiles each object this many times and keeps the fastest, as a benchmark does.
const ROUNDS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trusted = args.iter().any(|a| a == "trusted");
    let baseline = args.iter().any(|a| a == "baseline");
    let baseline_checked = args.iter().any(|a| a == "baseline-checked");
    let rounds = args
        .iter()
        .position(|a| a == "--repeat")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(ROUNDS);
    // Names to keep: anything that is not a flag, its value, or the mode.
    let names: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            !a.starts_with('-')
                && a != "trusted"
                && a != "baseline"
                && a != "baseline-checked"
                && a != "checked"
                && (i == 0 || args[i - 1] != "--repeat")
        })
        .map(|(_, a)| a)
        .collect();
    let engine = if baseline_checked {
        Engine::JitBaselineChecked
    } else if baseline {
        Engine::JitBaseline
    } else if trusted {
        Engine::JitTrusted
    } else {
        Engine::Jit
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/xdp/build");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/xdp/build")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .filter(|p| {
            let file = p.file_name().unwrap().to_string_lossy();
            names.is_empty() || names.iter().any(|n| file.contains(n.as_str()))
        })
        .collect();
    objects.sort();
    let (mut all_insns, mut all_time) = (0usize, Duration::ZERO);
    println!(
        "{:<28} {:>7} {:>10} {:>14}",
        "object", "insns", "compile", "us/1000 insns"
    );
    for path in objects {
        let Ok(obj) = load_file(&path, &LoadOptions::default()) else {
            continue;
        };
        let insns: usize = obj.programs.iter().map(|p| p.insns.len()).sum();
        let Ok(mut rt) = build_runtime(&obj, XdpConfig::default()) else {
            continue;
        };
        let mut best = Duration::MAX;
        for _ in 0..rounds {
            let start = thread_cpu_ns();
            rt.set_engine(&*engine.build(None))
                .expect("the JIT compiles the corpus");
            best = best.min(Duration::from_nanos(thread_cpu_ns() - start));
        }
        let name = path.file_name().unwrap().to_string_lossy();
        println!(
            "{name:<28} {insns:>7} {:>8.0}us {:>14.0}",
            best.as_secs_f64() * 1e6,
            best.as_secs_f64() * 1e9 / insns as f64
        );
        all_insns += insns;
        all_time += best;
    }
    println!(
        "total: {all_insns} instructions in {:.1} ms: {:.0} us per 1,000 instructions ({})",
        all_time.as_secs_f64() * 1e3,
        all_time.as_secs_f64() * 1e9 / all_insns as f64,
        engine.name()
    );
}
