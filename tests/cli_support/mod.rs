//! Shared by the `cli_*` tests: run the `bpfemu` binary as a user does and read what it said.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (the tests run the binary from there, as the README does).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path under `examples/`, as a string for the command line.
pub fn example(path: &str) -> String {
    root().join("examples").join(path).display().to_string()
}

/// `bpfemu ARGS` run to its end.
pub fn bpfemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("bpfemu runs")
}

/// `bpfemu ARGS` with `input` on standard input.
pub fn bpfemu_with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bpfemu starts");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("bpfemu ends");
    writer.join().unwrap();
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts the exit code, showing what the command said when it is another.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        truncate(&stdout(out)),
        truncate(&stderr(out))
    );
}

fn truncate(text: &str) -> &str {
    let end = text.char_indices().nth(4000).map_or(text.len(), |(i, _)| i);
    &text[..end]
}

/// A scratch directory of one test, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bpfemu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// True when bpf() is usable; otherwise says why the test skips (or fails it under
/// `BPFEMU_REQUIRE_KERNEL=1`, as CI sets).
pub fn kernel_or_skip(test: &str) -> bool {
    if bpfemu_kernel::kernel_available() {
        return true;
    }
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: BPFEMU_REQUIRE_KERNEL=1 but bpf() is not usable here"
    );
    eprintln!("{test}: skipping: the kernel's bpf() is not usable here");
    false
}

/// The verdict `bpfemu verify`'s table gives `program` (its row: file, program, verdict,
/// statistics), if it has a row.
#[allow(dead_code)]
pub fn verdict_row<'a>(report: &'a str, program: &str) -> Option<&'a str> {
    report.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let (_file, name, verdict) = (words.next()?, words.next()?, words.next()?);
        (name == program).then_some(verdict)
    })
}

/// The interpreter of the tests' Python environment (scripts/python_env.sh makes it once:
/// maturin, pytest, Scapy, junitparser, jsonschema), or `BPFEMU_PYTHON`.
#[allow(dead_code)]
pub fn python() -> String {
    if let Ok(python) = std::env::var("BPFEMU_PYTHON") {
        return python;
    }
    let out = Command::new(root().join("scripts/python_env.sh"))
        .output()
        .expect("scripts/python_env.sh runs");
    assert!(
        out.status.success(),
        "scripts/python_env.sh failed: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_owned()
}
