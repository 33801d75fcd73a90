//! The guest side: what `/init` does when a binary linking this crate is the initramfs's init.
//!
//! [`run_as_init`] mounts `/proc` and `/sys`, runs the plan the host put at [`PLAN_PATH`]
//! (jobs, each an argv whose output and exit status are captured; guest files to send back),
//! writes everything to the console as [`crate::frame`] records, and powers the machine off.
//! A binary hooks it at the top of `main`:
//!
//! ```no_run
//! if bpfemu_vmkernel::guest::is_init() {
//!     bpfemu_vmkernel::guest::run_as_init();
//! }
//! ```

use crate::frame::{self, CHUNK};
use std::ffi::CString;
use std::io::Write;
use std::process::{Command, Stdio};

/// Where the host puts the plan inside the initramfs.
pub const PLAN_PATH: &str = "/bpfemu-vm/plan";

/// The search path jobs get, the initramfs's `/bin` first.
pub const JOB_PATH: &str = "/bin:/usr/bin:/sbin:/usr/sbin";

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run this argv, capture its output and status.
    Job(Vec<String>),
    /// Send this guest file back (e.g. `/sys/kernel/btf/vmlinux`).
    Fetch(String),
}

/// The plan as the file holds it: one step a line, `job ARG...` or `fetch PATH`, every
/// argument base64 so that none needs quoting.
pub fn encode_plan(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        let (verb, words): (&str, Vec<&str>) = match step {
            Step::Job(argv) => ("job", argv.iter().map(String::as_str).collect()),
            Step::Fetch(path) => ("fetch", vec![path.as_str()]),
        };
        text.push_str(verb);
        for word in words {
            text.push(' ');
            text.push_str(&frame::base64_encode(word.as_bytes()));
        }
        text.push('\n');
    }
    text
}

/// Reads what [`encode_plan`] wrote.
pub fn decode_plan(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut words = line.split(' ');
        let verb = words.next().unwrap_or_default();
        let args = words
            .map(|w| {
                frame::base64_decode(w)
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| format!("{PLAN_PATH}:{}: bad base64 word", number + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let step = match (verb, args.as_slice()) {
            ("job", [_, ..]) => Step::Job(args),
            ("fetch", [path]) => Step::Fetch(path.clone()),
            _ => return Err(format!("{PLAN_PATH}:{}: unknown step {line:?}", number + 1)),
        };
        steps.push(step);
    }
    Ok(steps)
}

/// Whether this process is the initramfs's init: pid 1, started as `/init`.
pub fn is_init() -> bool {
    std::process::id() == 1
        && std::env::args_os()
            .next()
            .is_some_and(|arg0| arg0 == "/init")
}

/// Runs the plan and powers the machine off; never returns.
pub fn run_as_init() -> ! {
    let mut console = Console::default();
    console.record(&["start"]);
    if let Err(why) = run_plan(&mut console) {
        console.record(&["error", &frame::base64_encode(why.as_bytes())]);
    }
    let count = console.records.to_string();
    console.record(&["done", &count]);
    power_off()
}

/// Writes records to the console (init's standard output), counting them for `done`.
#[derive(Default)]
struct Console {
    records: u64,
}

impl Console {
    fn record(&mut self, fields: &[&str]) {
        let line = frame::encode_record(fields) + "\n";
        // One write per line, so that the line reaches the tty whole. A console that cannot
        // be written leaves nothing to report to.
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
        self.records += 1;
    }

    /// `tag INDEX CHUNK` lines carrying `bytes`, then nothing: the reader concatenates.
    fn payload(&mut self, tag: &str, index: &str, bytes: &[u8]) {
        for chunk in bytes.chunks(CHUNK) {
            self.record(&[tag, index, &frame::base64_encode(chunk)]);
        }
    }
}

fn run_plan(console: &mut Console) -> Result<(), String> {
    mount("proc", "/proc", "proc")?;
    mount("sysfs", "/sys", "sysfs")?;
    // Kernel messages would land in the middle of records: from here on only emergencies
    // reach the console.
    let _ = std::fs::write("/proc/sys/kernel/printk", "1");
    raise_memlock_limit();
    let release = kernel_release()?;
    console.record(&["release", &frame::base64_encode(release.as_bytes())]);
    let plan = std::fs::read_to_string(PLAN_PATH).map_err(|e| format!("{PLAN_PATH}: {e}"))?;
    for (index, step) in decode_plan(&plan)?.iter().enumerate() {
        let index = index.to_string();
        match step {
            Step::Job(argv) => run_job(console, &index, argv),
            Step::Fetch(path) => fetch(console, &index, path),
        }
    }
    Ok(())
}

fn run_job(console: &mut Console, index: &str, argv: &[String]) {
    console.record(&["job-start", index]);
    let output = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", JOB_PATH)
        .env("HOME", "/")
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(output) => {
            console.payload("stdout", index, &output.stdout);
            console.payload("stderr", index, &output.stderr);
            let status = match (output.status.code(), signal_of(&output.status)) {
                (Some(code), _) => format!("exit:{code}"),
                (None, Some(signal)) => format!("signal:{signal}"),
                (None, None) => "signal:0".to_owned(),
            };
            console.record(&["job-end", index, &status]);
        }
        Err(e) => {
            let why = format!("cannot run {}: {e}", argv[0]);
            console.record(&["job-fail", index, &frame::base64_encode(why.as_bytes())]);
        }
    }
}

fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

fn fetch(console: &mut Console, index: &str, path: &str) {
    match std::fs::read(path) {
        Ok(bytes) => {
            console.payload("file", index, &bytes);
            console.record(&["file-end", index]);
        }
        Err(e) => {
            let why = format!("{path}: {e}");
            console.record(&["file-fail", index, &frame::base64_encode(why.as_bytes())]);
        }
    }
}

fn kernel_release() -> Result<String, String> {
    // /proc is mounted by now; this is what `uname -r` prints.
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_owned())
        .map_err(|e| format!("/proc/sys/kernel/osrelease: {e}"))
}

fn mount(source: &str, target: &str, fstype: &str) -> Result<(), String> {
    let c = |s: &str| CString::new(s).map_err(|_| format!("mount {target}: NUL in {s:?}"));
    let (source_c, target_c, fstype_c) = (c(source)?, c(target)?, c(fstype)?);
    // SAFETY: three NUL-terminated strings that outlive the call, no flags, no data.
    let rc = unsafe {
        libc::mount(
            source_c.as_ptr(),
            target_c.as_ptr(),
            fstype_c.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("mount -t {fstype} {source} {target}: {e}"));
    }
    Ok(())
}

/// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK, whose default of 64 KiB fails a
/// map of a few entries; libbpf raises it too, but a job that is not libbpf may not.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit that outlives the call; failure leaves the default limit.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

fn power_off() -> ! {
    // SAFETY: sync and reboot take no pointers; as pid 1 the reboot powers the machine off.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // Not pid 1 or not allowed: nothing left to do but end, which panics the kernel, and the
    // host's `panic=-1 -no-reboot` ends the machine all the same.
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_arguments_with_spaces_and_newlines() {
        let steps = vec![
            Step::Job(vec!["/bin/judge".into(), "a b\nc".into(), String::new()]),
            Step::Fetch("/sys/kernel/btf/vmlinux".into()),
        ];
        assert_eq!(decode_plan(&encode_plan(&steps)), Ok(steps));
        assert!(decode_plan("run Zm9v\n").is_err());
    }
}
