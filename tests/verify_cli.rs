//! `bpfemu verify`: its answer equals bpfemu's verifier library on every corpus object and on a
//! program the kernel rejects; a rejection is placed as compilers place errors; exit codes 0/1/2.

#[allow(dead_code)]
mod cli_support;

use bpfemu_verifier::{Options, ProgramInput, verify};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .output()
        .expect("bpfemu runs")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn objects() -> Vec<PathBuf> {
    let mut objects: Vec<PathBuf> = ["examples/xdp/build", "tests/data/verify"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect("objects built"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    objects
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every object's JSON report equals the library's verdicts, and the exit code is 0 when every
/// program is accepted, 1 when one is rejected, 2 when one is undecided and none rejected.
#[test]
fn verify_reports_the_verifier_verdict_for_every_object() {
    let mut programs = 0;
    for path in objects() {
        let name = path.to_str().expect("utf-8 path");
        let out = bpfemu(&["verify", "--json", name]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", text(&out.stderr)));
        let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
        let reported = doc["programs"].as_array().expect("programs");
        assert_eq!(reported.len(), obj.programs.len(), "{name}");
        let (mut rejected, mut undecided) = (false, false);
        for (p, prog) in reported.iter().zip(&obj.programs) {
            let v = verify(&ProgramInput::new(&obj, prog), &Options::default());
            assert_eq!(p["name"], prog.name.as_str(), "{name}");
            assert_eq!(p["accepted"], v.is_accepted(), "{name}: {p:#}");
            assert_eq!(
                p["processed_insns"], v.stats.processed_insns,
                "{name}: {p:#}"
            );
            match v.rejection() {
                Some(r) => {
                    assert_eq!(p["message"], r.message.as_str(), "{name}: {p:#}");
                    assert_eq!(p["insn"], serde_json::json!(r.insn), "{name}: {p:#}");
                }
                None => assert!(p.get("message").is_none(), "{name}: {p:#}"),
            }
            undecided |= v.is_undecided();
            rejected |= !v.is_accepted() && !v.is_undecided();
            programs += 1;
        }
        let expected = match (rejected, undecided) {
            (true, _) => 1,
            (false, true) => 2,
            (false, false) => 0,
        };
        assert_eq!(out.status.code(), Some(expected), "{name}: {doc:#}");
    }
    assert!(programs >= 60, "{programs} programs");
}

/// A rejection reads `file.c:LINE:COL: error: MESSAGE`, the line that line_info gives for the
/// rejected instruction, its source text, and the instruction as the kernel's log prints it.
#[test]
fn a_rejection_is_placed_like_a_compiler_error() {
    let path = root().join("tests/data/verify/unchecked_read.o");
    let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
    let prog = obj
        .programs
        .iter()
        .find(|p| p.name == "xdp_unchecked")
        .expect("program");
    let v = verify(&ProgramInput::new(&obj, prog), &Options::default());
    let out = bpfemu(&["verify", path.to_str().unwrap(), "--prog", "xdp_unchecked"]);
    let stdout = text(&out.stdout);
    let Some(r) = v.rejection() else {
        // Accepting it would be a verifier bug that tests/probes.rs and the corpus test catch;
        // here only the report's form is at stake.
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let pc = r.insn.expect("the rejection names an instruction");
    let src = bpfemu::verify::source_of(&prog.line_info, pc).expect("line_info covers it");
    let first = stdout.lines().next().unwrap_or("");
    assert_eq!(
        first,
        format!(
            "{}:{}:{}: error: {}",
            src.file_name, src.line, src.column, r.message
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("| {}", src.line_text.trim())),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("insn {pc}: (")), "{stdout}");
    assert!(
        stdout.ends_with("1 programs: 0 accepted, 1 rejected\n"),
        "{stdout}"
    );
}

/// A program calling a kfunc bpfemu's verifier does not check yet is neither accepted nor
/// rejected: "undecided" in text and JSON, the call placed and named as the kernel names it,
/// and exit 2 (a CI job must not pass, nor blame the program, on a judgement nobody made).
#[test]
fn an_unchecked_kfunc_leaves_the_program_undecided() {
    let path = root().join("tests/data/undecided/wq.o");
    let name = path.to_str().unwrap();
    let out = bpfemu(&["verify", name]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("error: not yet supported: kfunc bpf_wq_init"),
        "{stdout}"
    );
    assert!(stdout.contains("call bpf_wq_init#"), "{stdout}");
    assert_eq!(
        cli_support::verdict_row(&stdout, "xdp_workqueue"),
        Some("undecided"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("1 programs: 0 accepted, 0 rejected, 1 undecided (bpfemu does not check what they use yet)\n"),
        "{stdout}"
    );
    let json = bpfemu(&["verify", "--json", name]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(doc["programs"][0]["verdict"], "undecided", "{doc:#}");
    assert_eq!(doc["programs"][0]["accepted"], false, "{doc:#}");
    assert_eq!(json.status.code(), Some(2));
}

/// --log-level 1 and 2 give the library's log at that level, in text and JSON.
#[test]
fn the_log_is_printed_at_the_level_asked() {
    let path = root().join("tests/data/verify/unchecked_read.o");
    let obj = bpfemu_loader::load_file(&path, &Default::default()).expect("loads");
    for level in [1u32, 2] {
        let out = bpfemu(&[
            "verify",
            path.to_str().unwrap(),
            "--json",
            "--log-level",
            &level.to_string(),
        ]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        for (p, prog) in doc["programs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&obj.programs)
        {
            let opts = Options {
                log_level: level,
                ..Options::default()
            };
            let v = verify(&ProgramInput::new(&obj, prog), &opts);
            assert_eq!(p["log"], v.log.as_str(), "level {level}: {p:#}");
        }
    }
    let out = bpfemu(&["verify", path.to_str().unwrap()]);
    let doc = bpfemu(&["verify", path.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).expect("JSON");
    assert!(doc["programs"][0].get("log").is_none(), "{doc:#}");
    assert!(!text(&out.stdout).is_empty());
}

#[test]
fn bad_input_exits_2_with_a_one_line_error() {
    let missing = root().join("tests/data/verify/no_such_file.o");
    let not_elf = root().join("tests/data/verify/unchecked_read.c");
    let good = root().join("tests/data/verify/unchecked_read.o");
    let cases: [(Vec<&str>, &str); 4] = [
        (vec!["verify", missing.to_str().unwrap()], "no_such_file.o"),
        (
            vec!["verify", not_elf.to_str().unwrap()],
            "unchecked_read.c",
        ),
        (
            vec!["verify", good.to_str().unwrap(), "--prog", "nope"],
            "no program named 'nope'",
        ),
        (
            vec!["verify", good.to_str().unwrap(), "--log-level", "3"],
            "log-level",
        ),
    ];
    for (args, needle) in cases {
        let out = bpfemu(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn the_test_object_is_the_one_its_source_describes() {
    // The committed object must come from the committed source (rebuild both together).
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/verify/unchecked_read.c"),
    )
    .expect("source");
    let obj = bpfemu_loader::load_file(
        &root().join("tests/data/verify/unchecked_read.o"),
        &Default::default(),
    )
    .expect("loads");
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

/// replay, diff and bench verify first, as the kernel does before it runs anything: a program
/// bpfemu's verifier rejects is refused with the verifier's message placed at its source line
/// (exit 1, before the kernel is needed), unless `--no-verify`; an accepted one runs.
#[test]
fn replay_diff_and_bench_refuse_a_rejected_program_unless_no_verify() {
    let obj = root().join("tests/data/verify/unchecked_read.o");
    let pcap = root().join("examples/pcap/vlan.pcap");
    let loaded = bpfemu_loader::load_file(&obj, &Default::default()).expect("loads");
    let (obj, pcap) = (obj.to_str().unwrap(), pcap.to_str().unwrap());
    let rejection = |prog: &str| {
        let p = loaded.programs.iter().find(|p| p.name == prog).unwrap();
        verify(&ProgramInput::new(&loaded, p), &Options::default())
            .rejection()
            .map(|r| r.message.clone())
    };
    assert_eq!(rejection("xdp_ok"), None);
    let message = rejection("xdp_unchecked").expect("xdp_unchecked is rejected");
    for command in ["replay", "diff", "bench"] {
        let run = |prog: &str, extra: &[&str]| {
            let mut args = vec![command, obj, pcap, "--prog", prog];
            if command == "bench" {
                args.extend(["--packets", "20"]);
            }
            args.extend(extra);
            let out = bpfemu(&args);
            (out.status.code(), text(&out.stderr))
        };
        let (code, stderr) = run("xdp_unchecked", &[]);
        assert_eq!(code, Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("unchecked_read.c:") && stderr.contains(&message),
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains("the verifier rejects program xdp_unchecked (--no-verify"),
            "{command}: {stderr}"
        );
        for (prog, extra) in [("xdp_unchecked", &["--no-verify"][..]), ("xdp_ok", &[])] {
            let (code, stderr) = run(prog, extra);
            assert!(
                !stderr.contains("the verifier rejects"),
                "{command}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{command}: {stderr}");
            assert!(code.is_some(), "{command}: {stderr}");
        }
    }
    // Accepted and run: replay of the checked program ends normally.
    let out = bpfemu(&["replay", obj, pcap, "--prog", "xdp_ok"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The README's `bpfemu verify` example is the command's real output (times aside).
#[test]
fn the_readme_shows_real_verify_output() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let command = "$ bpfemu verify tests/data/verify/unchecked_read.o\n";
    let start = readme
        .find(command)
        .expect("the README shows bpfemu verify")
        + command.len();
    let shown = &readme[start..start + readme[start..].find("```").expect("block end")];
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(["verify", "tests/data/verify/unchecked_read.o"])
        .current_dir(root())
        .output()
        .expect("bpfemu runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(without_times(shown), without_times(&text(&out.stdout)));
}

/// The table's rows with their duration (which changes from run to run) left out, and the
/// columns' padding (which follows the widest value) collapsed.
fn without_times(report: &str) -> String {
    report
        .lines()
        .map(|line| {
            let mut words: Vec<&str> = line.split_whitespace().collect();
            let is_row = words.len() > 3
                && ["accepted", "rejected", "undecided"].contains(&words[2])
                && words[3].bytes().all(|b| b.is_ascii_digit());
            if is_row {
                words[3] = "_";
            }
            if words.iter().all(|w| w.bytes().all(|b| b == b'-')) {
                return "---".to_owned();
            }
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Programs of other types beside an XDP one (a tracepoint, a tc program) are named as not
/// verified, neither accepted nor rejected: the XDP verdict decides the exit code, and an
/// object or selection with nothing bpfemu verifies exits 2 rather than pass a CI job that
/// checked nothing.
#[test]
fn programs_of_other_types_are_named_not_verified() {
    let obj = "tests/objects/beside_xdp.o";
    let out = bpfemu(&["verify", obj]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for (prog, kind) in [("count_exceptions", "tracepoint"), ("tc_pass", "sched_cls")] {
        assert!(
            stdout.lines().any(|l| l.contains(&format!(": {prog} ("))
                && l.ends_with(&format!("not verified: bpfemu's verifier judges XDP programs, and this is a {kind} program"))),
            "{prog}: {stdout}"
        );
    }
    assert_eq!(
        cli_support::verdict_row(&stdout, "short_frames"),
        Some("accepted"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("3 programs: 1 accepted, 0 rejected, 2 not verified (not XDP)\n"),
        "{stdout}"
    );

    let out = bpfemu(&["verify", "--json", obj]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["programs"].as_array().map(Vec::len), Some(1), "{doc:#}");
    let others: Vec<&str> = doc["not_verified"]
        .as_array()
        .expect("not_verified")
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(others, ["count_exceptions", "tc_pass"], "{doc:#}");

    let out = bpfemu(&["verify", obj, "--prog", "tc_pass"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("no XDP program to verify"),
        "{}",
        text(&out.stderr)
    );
}

/// `--btf FILE` is the kernel the verifier judges kfunc calls by, not only the one the loader
/// resolves `__ksym` externs against, and the runtime names the kfuncs from it too. FILE here
/// is the running kernel's BTF with `bpf_iter_num_new` and `schedule` trading type ids: the
/// iterator programs' calls then hold `schedule`'s id of the running kernel, which names
/// `bpf_iter_num_new` only in FILE. Judged by FILE, every verdict is the one they get from
/// the running kernel; judged by the running kernel, the calls would be calls of `schedule`.
#[test]
fn the_verifier_judges_kfunc_calls_by_the_btf_given() {
    use bpfemu_loader::btf::{Btf, BtfKind};
    use bpfemu_loader::{Kernel, LoadOptions, load_file};
    let Ok(raw) = std::fs::read("/sys/kernel/btf/vmlinux") else {
        eprintln!("skipping: no /sys/kernel/btf/vmlinux to derive another BTF from");
        return;
    };
    let mut btf = Btf::parse(&raw).expect("vmlinux BTF parses");
    let func = |btf: &Btf, name| {
        btf.find_by_name_kind(name, |k| matches!(k, BtfKind::Func { .. }))
            .unwrap_or_else(|| panic!("vmlinux has {name}")) as usize
    };
    let (iter_new, schedule) = (func(&btf, "bpf_iter_num_new"), func(&btf, "schedule"));
    btf.types.swap(iter_new, schedule);
    let other = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("iter_num_new_swapped.btf");
    std::fs::write(&other, btf.to_kernel_bytes().bytes).expect("the BTF is written");

    let object = root().join("tests/data/verify/iterators.o");
    let verdicts = |extra: &[&str]| {
        let mut args = vec!["verify", "--json", object.to_str().unwrap()];
        args.extend(extra);
        let out = bpfemu(&args);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        let words: Vec<(String, String)> = doc["programs"]
            .as_array()
            .expect("programs")
            .iter()
            .map(|p| (p["name"].to_string(), p["verdict"].to_string()))
            .collect();
        (words, out.status.code())
    };
    let running = verdicts(&[]);
    assert!(
        running.0.iter().any(|(_, v)| v == "\"accepted\""),
        "{running:?}"
    );
    assert_eq!(verdicts(&["--btf", other.to_str().unwrap()]), running);

    // The same through the library: the object keeps the kernel it was loaded into, and what
    // the runtime is told names the swapped id; the running kernel would judge another call.
    let kernel = Kernel::with_btf_file(&other);
    let opts = LoadOptions {
        kernel: kernel.clone(),
        ..LoadOptions::default()
    };
    let obj = load_file(&object, &opts).expect("it loads against the other BTF");
    let names = obj.kfunc_names().expect("the other BTF reads");
    assert_eq!(
        names.get(&(schedule as i32)).map(String::as_str),
        Some("bpf_iter_num_new"),
        "{names:?}"
    );
    let index = obj
        .programs
        .iter()
        .position(|p| p.name == "xdp_iter_sum")
        .expect("xdp_iter_sum");
    let prog = &obj.programs[index];
    assert!(verify(&ProgramInput::new(&obj, prog), &Options::default()).is_accepted());
    let running_kernel = Kernel::running();
    let by_running = ProgramInput {
        kernel: &running_kernel,
        ..ProgramInput::new(&obj, prog)
    };
    assert!(!verify(&by_running, &Options::default()).is_accepted());
    let rt = bpfemu::vm_runtime::build_runtime(&obj, Default::default()).expect("it builds");
    rt.runnable(index)
        .expect("the runtime names the kfuncs from the other BTF");
}

/// A map type the kernel lacks fails every program of the object, as libbpf reports a map the
/// kernel refuses: Debian's 6.1.170, booted under QEMU, refused an arena with EINVAL (the
/// probe `kernels/map_arena_since_6_9_ok`), and 6.12.95 created it.
#[test]
fn a_map_type_the_kernel_lacks_fails_the_object() {
    let obj = root().join("tests/data/verifier/arena_globals.o");
    let obj = obj.to_str().expect("utf-8 path");
    let old = bpfemu(&["verify", obj, "--kernel", "6.1"]);
    let said = text(&old.stdout) + &text(&old.stderr);
    assert_eq!(old.status.code(), Some(1), "{said}");
    assert!(
        said.contains("arena_global_counter: map 'arena': failed to create: -EINVAL"),
        "{said}"
    );
    let new = bpfemu(&["verify", obj, "--kernel", "6.12"]);
    let said = text(&new.stdout) + &text(&new.stderr);
    assert!(!said.contains("failed to create"), "{said}");
}
