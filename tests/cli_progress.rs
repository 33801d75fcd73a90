//! Progress on a terminal (issue 11 item 13): every long command (replay, diff, bench, fuzz,
//! conformance) draws a bar on standard error with what is done, its rate and its share, that
//! reaches 100% and is cleared at the end; nothing of it reaches standard output, and nothing
//! is drawn when standard error is not a terminal (a pipe, a CI log).
//!
//! The terminal is a pseudo-terminal from script(1); the command's standard output goes to a
//! file so that only its standard error is drawn on the terminal.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, assert_exit, bpfemu, example, kernel_or_skip, root, stderr};
use std::process::Command;

/// What `bpfemu ARGS` drew on a terminal (its standard error), and its standard output.
fn on_a_terminal(args: &[&str], scratch: &Scratch) -> (String, String) {
    let out_file = scratch.path("stdout");
    let command = format!(
        "{} {} >{out_file}",
        env!("CARGO_BIN_EXE_bpfemu"),
        args.join(" ")
    );
    let run = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("TERM", "xterm")
        .current_dir(root())
        .output()
        .expect("script(1) runs (util-linux / bsdutils)");
    let drawn = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{command}: {:?}\n{drawn}", run.status);
    let stdout = std::fs::read_to_string(&out_file).unwrap();
    (drawn, stdout)
}

/// The frames drawn, in order (each redraw starts with a carriage return).
fn frames(drawn: &str) -> Vec<&str> {
    drawn
        .split('\r')
        .map(|f| f.trim_start_matches("\x1b[2K").trim_end())
        .filter(|f| !f.is_empty())
        .collect()
}

/// Checks that a bar labelled `label` was drawn, counted `unit`, reached 100% with `total`
/// of them, and was cleared after; and that standard output holds none of it.
#[track_caller]
fn assert_bar(drawn: &str, stdout: &str, label: &str, total: u64, unit: &str) {
    let frames = frames(drawn);
    let bars: Vec<&&str> = frames.iter().filter(|f| f.contains(label)).collect();
    assert!(!bars.is_empty(), "no bar labelled {label}:\n{drawn:?}");
    let last = bars.last().unwrap();
    assert!(
        last.contains("100%") && last.contains(&format!(" {total} {unit}, ")),
        "the last frame of {label}: {last:?}"
    );
    assert!(last.contains("/s"), "no rate in {last:?}");
    // The last frame is followed by a clear of its line (the command's own messages may come
    // after it).
    let after_last = &drawn[drawn.rfind(label).unwrap()..];
    let cleared = after_last
        .split_once('\r')
        .is_some_and(|(_, rest)| rest.starts_with("\x1b[2K"));
    assert!(cleared, "the bar is not cleared at the end: {drawn:?}");
    assert!(
        !stdout.contains('\x1b') && !stdout.contains('\r') && !stdout.contains("[="),
        "the bar reached standard output: {stdout:?}"
    );
}

/// On a pipe, standard error holds no bar.
#[track_caller]
fn assert_no_bar_on_a_pipe(args: &[&str], code: i32) {
    let out = bpfemu(args);
    assert_exit(&out, code);
    let err = stderr(&out);
    assert!(
        !err.contains('\x1b') && !err.contains('\r') && !err.contains('%'),
        "a bar on a pipe: {err:?}"
    );
}

#[test]
fn replay_shows_packets_rate_and_share_of_the_file() {
    let scratch = Scratch::new("progress-replay");
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let args = ["replay", &obj, &pcap];
    let (drawn, stdout) = on_a_terminal(&args, &scratch);
    assert_bar(&drawn, &stdout, "normal.pcap [", 200, "packets");
    assert!(stdout.contains("total"), "{stdout}");
    assert_no_bar_on_a_pipe(&args, 0);

    // From standard input the size is unknown: a spinner with the count, no share.
    let piped = format!("replay {obj} - <{pcap}");
    let (drawn, _) = on_a_terminal(&[&piped], &scratch);
    let last = frames(&drawn)
        .into_iter()
        .rfind(|f| f.contains(" - "))
        .unwrap();
    assert!(
        last.contains("200 packets, ") && !last.contains('%'),
        "{last:?}"
    );
}

#[test]
fn bench_shows_each_engine_against_the_packets_asked() {
    let scratch = Scratch::new("progress-bench");
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let args = ["bench", &obj, &pcap, "--packets", "50000"];
    let start = std::time::Instant::now();
    let (drawn, stdout) = on_a_terminal(&args, &scratch);
    // Steady: about ten frames a second (the spinner's and the counts'), not one a packet;
    // each engine's bar (interp, jit, jit-trusted, kernel) adds its first and last frames.
    let most = 15.0 * start.elapsed().as_secs_f64() + 10.0 * 4.0;
    let drawn_frames = frames(&drawn).len();
    assert!(
        (drawn_frames as f64) < most,
        "{drawn_frames} frames in {:?}",
        start.elapsed()
    );
    assert_bar(&drawn, &stdout, "interp [", 50000, "packets");
    if bpfemu_kernel::kernel_available() {
        assert_bar(&drawn, &stdout, "kernel [", 50000, "packets");
    }
    assert_no_bar_on_a_pipe(&args, 0);
}

#[test]
fn fuzz_shows_runs_against_the_budget() {
    let scratch = Scratch::new("progress-fuzz");
    let obj = example("xdp/build/reflector.v3.o");
    let args = [
        "fuzz",
        &obj,
        "--runs",
        "700",
        "--out",
        &scratch.path("findings"),
    ];
    let (drawn, stdout) = on_a_terminal(&args, &scratch);
    assert_bar(&drawn, &stdout, "fuzz [", 700, "runs");
    assert_no_bar_on_a_pipe(&args, 0);
}

#[test]
fn conformance_shows_files() {
    let scratch = Scratch::new("progress-conformance");
    let dir = root().join("../shared/conformance/bpf_conformance/tests");
    let dir = std::env::var("BPFEMU_CONFORMANCE_DIR").unwrap_or(dir.display().to_string());
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "data")
        })
        .count() as u64;
    let args = ["conformance", &dir];
    let (drawn, stdout) = on_a_terminal(&args, &scratch);
    assert_bar(&drawn, &stdout, "tests [", files, "files");
    assert_no_bar_on_a_pipe(&args, 0);
}

#[test]
fn diff_shows_packets_and_keeps_its_lines_apart() {
    if !kernel_or_skip("diff_shows_packets_and_keeps_its_lines_apart") {
        return;
    }
    let scratch = Scratch::new("progress-diff");
    let obj = example("xdp/build/reflector.v3.o");
    let pcap = example("pcap/normal.pcap");
    let args = ["diff", &obj, &pcap];
    let (drawn, stdout) = on_a_terminal(&args, &scratch);
    assert_bar(&drawn, &stdout, "normal.pcap [", 200, "packets");
    assert!(stdout.contains("200 packets"), "{stdout}");
    assert_no_bar_on_a_pipe(&args, 0);
}
