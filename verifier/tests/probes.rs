//! The probe corpus (`verifier/probes/*.probes`) against the running kernel: each probe is
//! loaded into the kernel (raw bpf(), as root) and verified by bpfemu; the verdict and the final
//! error line must be equal, except for the probes listed in `verifier/probes/KNOWN_DIFFERENCES`,
//! which must still differ. Prints both processed-instruction counts per probe and the shares;
//! the counts must be equal too.
//!
//! `BPFEMU_PROBE=SUBSTRING` runs only the probes whose name contains it (the list is then
//! checked only for those); `BPFEMU_PROBE_SHOW=1` prints both judgements of each probe run. Skipped with a message when bpf() is out of reach, unless
//! `BPFEMU_REQUIRE_KERNEL=1`.

mod common;

use bpfemu_loader::Kernel;
use bpfemu_verifier::Options;
use common::report::Tally;
use common::{bpfemu_side, kernel_side, known, probe, soundness};

#[test]
fn probes_match_the_kernel() {
    if !bpfemu_conformance::libbpf::kernel_or_skip("probes_match_the_kernel") {
        return;
    }
    let probes = probe::load_all(&probe::probe_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        probes.len() >= 300,
        "the corpus has {} probes",
        probes.len()
    );
    let filter = std::env::var("BPFEMU_PROBE").unwrap_or_default();
    // One kernel for every probe: its BTF (kfunc and ksym probes) is read once.
    let running = Kernel::running();
    let mut tally = Tally::default();
    let mut names = Vec::new();
    let mut faults = Vec::new();
    let mut run = 0;
    for p in probes.iter().filter(|p| p.name.contains(&filter)) {
        let kernel = kernel_side::judge(p).unwrap_or_else(|e| panic!("{}: {e}", p.place));
        let verdict = bpfemu_side::verify_probe(p, &Options::default(), &running);
        let ours = bpfemu_side::judgement(&verdict);
        // Soundness: what bpfemu accepts must run without a fault; programs reading kernel
        // structures (map internals) are not run, bpfemu's runtimes having none to read.
        if ours.accepted && !verdict.reads_kernel_memory() {
            match soundness::run_randomly(&p.insns, &p.maps, name_seed(&p.name), 40, &running) {
                Ok(ran) => run += usize::from(ran),
                Err(e) => faults.push(format!("{}: accepted by bpfemu, faults: {e}", p.name)),
            }
        }
        if std::env::var_os("BPFEMU_PROBE_SHOW").is_some() {
            println!(
                "{}\n  kernel: {}\n  bpfemu: {}",
                p.name,
                kernel.summary(),
                ours.summary()
            );
        }
        tally.record(&p.name, &kernel, &ours);
        names.push(p.name.clone());
    }
    println!("{:<64} {:>7} {:>7}", "probe", "kernel", "bpfemu");
    for row in &tally.rows {
        println!("{row}");
    }
    println!("{}", tally.summary("probes"));
    println!(
        "soundness: {run} accepted probes ran on 40 random packets each, {} faulted",
        faults.len()
    );
    assert!(faults.is_empty(), "verifier bugs:\n{}", faults.join("\n"));
    // Every probe explores what the kernel explores: pruning, precision and liveness as 6.18.
    assert!(
        tally.count_differing.is_empty(),
        "processed-instruction counts differ from the kernel's:\n{}",
        tally.count_differing.join("\n")
    );
    let mut listed = known::load("", Some("corpus/"));
    if !filter.is_empty() {
        listed.retain(|name, _| name.contains(&filter));
    }
    if known::update_requested() {
        known::rewrite("", Some("corpus/"), &tally.differing, &names);
        return;
    }
    let complaints = known::check(&listed, &tally.differing, &names);
    assert!(
        complaints.is_empty(),
        "{} problems with {}:\n{}\n{}",
        complaints.len(),
        known::known_differences_path().display(),
        complaints.join("\n"),
        known::UPDATE_HINT
    );
}

/// Every probe parses and assembles, and the names say the rule: a check that needs no kernel.
#[test]
fn probe_files_parse() {
    let probes = probe::load_all(&probe::probe_dir()).unwrap_or_else(|e| panic!("{e}"));
    for p in &probes {
        assert!(!p.insns.is_empty(), "{}: empty probe", p.place);
        let variant = p.name.rsplit('_').next().unwrap_or("");
        assert!(
            variant == "ok" || variant == "bad",
            "{}: {} should end in _ok or _bad (what the kernel says, as a reader's guide)",
            p.place,
            p.name
        );
    }
}

/// A seed derived from the probe's name, so that each probe sees its own packets, the same on
/// every run.
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Where the kernel refuses without logging a reason (bpf_snprintf's data_len not a multiple
/// of 8), bpfemu's log (statistics level, as the kernel side asks) says nothing either,
/// while its rejection tells the user why and is marked as not logged.
#[test]
fn a_refusal_the_kernel_does_not_log_is_explained_but_not_logged() {
    let probes = probe::load_all(&probe::probe_dir()).unwrap_or_else(|e| panic!("{e}"));
    let p = probes
        .iter()
        .find(|p| p.name == "const_str/snprintf_data_len_not_multiple_of_eight_bad")
        .expect("the probe exists");
    let opts = Options {
        log_level: 4,
        ..Options::default()
    };
    let verdict = bpfemu_side::verify_probe(p, &opts, &Kernel::running());
    let r = verdict.rejection().expect("rejected");
    assert!(!r.logged, "{r:?}");
    assert_eq!(r.kernel_error_line(), None);
    assert!(r.message.contains("data_len (R5) is 4"), "{}", r.message);
    let reasons: Vec<&str> = verdict
        .log
        .lines()
        .filter(|l| !l.starts_with("processed ") && !l.starts_with("verification time"))
        .filter(|l| !l.starts_with("stack depth"))
        .collect();
    assert!(
        reasons.is_empty(),
        "log lines besides statistics: {reasons:?}"
    );
    let judged = bpfemu_side::judgement(&verdict);
    assert_eq!(judged.message.as_deref(), Some("(empty verifier log)"));
}

/// The level-2 log names kfuncs as the kernel does (`call bpf_dynptr_from_xdp#ID`), counts
/// their arguments in the live registers, and prints an XDP dynptr's stack slots as one
/// `fp-16=dynptr_xdp(id=1,dynptr_id=1)`: those lines equal the kernel's.
#[test]
fn kfunc_and_dynptr_lines_of_the_log_equal_the_kernels() {
    if !bpfemu_conformance::libbpf::kernel_or_skip("kfunc_and_dynptr_lines_of_the_log") {
        return;
    }
    let probes = probe::load_all(&probe::probe_dir()).unwrap_or_else(|e| panic!("{e}"));
    let p = probes
        .iter()
        .find(|p| p.name == "dynptr_xdp/slice_without_buffer_ok")
        .expect("the probe exists");
    let fds = kernel_side::create_maps(&p.maps).expect("maps");
    let insns = kernel_side::with_fds(&p.insns, &fds);
    let mut opts = bpfemu_kernel::LoadOptions::new(bpfemu_kernel::BPF_PROG_TYPE_XDP, &insns);
    opts.log_level = 2;
    opts.log_size = 1 << 20;
    let kernel_log = bpfemu_kernel::prog_load(&opts).log;
    let ours = bpfemu_side::verify_probe(
        p,
        &Options {
            log_level: 2,
            ..Options::default()
        },
        &Kernel::running(),
    );
    let wanted = |l: &&str| l.contains("call bpf_dynptr") || l.contains("dynptr_xdp(");
    let kernel_lines: Vec<&str> = kernel_log.lines().filter(wanted).collect();
    let our_lines: Vec<&str> = ours.log.lines().filter(wanted).collect();
    assert!(kernel_lines.len() >= 4, "{kernel_log}");
    assert_eq!(our_lines, kernel_lines, "\nbpfemu's log:\n{}", ours.log);
}
