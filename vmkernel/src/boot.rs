//! The host side: builds the initramfs, boots the kernel under QEMU (TCG: no KVM needed) and
//! reads the guest's framed results back from the console.
//!
//! ```no_run
//! use bpfemu_vmkernel::Vm;
//! use std::path::Path;
//! let results = Vm::new(Path::new("vmlinuz"), Path::new("target/debug/bpfemu"))
//!     .with_binary("/bin/judge", Path::new("target/debug/examples/libbpf_verdicts"))
//!     .with_file("/objects/a.o", std::fs::read("a.o")?)
//!     .job(["/bin/judge", "/objects/a.o"])
//!     .run()?;
//! println!("{}: {}", results.release, String::from_utf8_lossy(&results.jobs[0].stdout));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::frame::{self, Scanned};
use crate::guest::{self, Step};
use crate::initramfs::{Initramfs, InitramfsError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The QEMU the harness runs.
pub const QEMU: &str = "qemu-system-x86_64";

/// Boots of one [`Vm::run`] when the kernel dies before init (see there).
pub const BOOT_ATTEMPTS: u32 = 3;

/// Guest memory besides the initramfs: the cloud kernels boot and load programs in less.
const BASE_MEMORY_MIB: u64 = 256;

/// A machine to boot: a kernel, an init, the files and jobs of its initramfs.
#[derive(Debug, Clone)]
pub struct Vm {
    kernel: PathBuf,
    init: PathBuf,
    binaries: Vec<(String, PathBuf)>,
    files: Vec<(String, Vec<u8>)>,
    steps: Vec<Step>,
    timeout: Duration,
}

/// How a job ended in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Exited(i32),
    Signaled(i32),
    /// The guest could not start it (no such file, not executable, a missing library).
    NotStarted(String),
}

/// One job's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    pub argv: Vec<String>,
    pub status: JobStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// What one boot gave.
#[derive(Debug, Clone)]
pub struct Results {
    /// The guest kernel's release (`uname -r`).
    pub release: String,
    /// The jobs, in the order they were added.
    pub jobs: Vec<JobResult>,
    /// The fetched guest files by guest path: their bytes, or why they could not be read.
    pub files: BTreeMap<String, Result<Vec<u8>, String>>,
    /// From starting QEMU to its exit.
    pub wall: Duration,
    /// The initramfs's size and the guest's memory.
    pub initramfs_bytes: u64,
    pub memory_mib: u64,
    /// How many boots it took: more than 1 when the kernel died before init (see [`Vm::run`]).
    pub boots: u32,
}

/// One boot's failure: the kernel died before init (worth another boot), or anything else.
enum Attempt {
    KernelDied(VmError),
    Failed(VmError),
}

/// The error of the last of several boots, saying how many there were.
fn with_boots(mut error: VmError, boots: u32) -> VmError {
    if let VmError::Incomplete { stage, .. } | VmError::TimedOut { stage, .. } = &mut error {
        stage.push_str(&format!(", in each of {boots} boots"));
    }
    error
}

/// Whether the console shows the kernel's own death (an oops or a panic).
fn kernel_died(console: &str) -> bool {
    console.contains("Kernel panic - not syncing") || console.contains("Oops:")
}

/// Why a boot gave no results; each names the kernel image.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("{QEMU} is not installed (apt-get install qemu-system-x86)")]
    QemuMissing,
    #[error(transparent)]
    Initramfs(#[from] InitramfsError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{kernel}: no results after {seconds} s, QEMU killed ({stage}); console ends: {tail}")]
    TimedOut {
        kernel: String,
        seconds: u64,
        stage: String,
        tail: String,
    },
    #[error("{kernel}: the guest ended without finishing ({stage}); console ends: {tail}")]
    Incomplete {
        kernel: String,
        stage: String,
        tail: String,
    },
    #[error("{kernel}: console line {line}: {reason}")]
    Garbled {
        kernel: String,
        line: usize,
        reason: String,
    },
    #[error("{kernel}: the guest's init failed: {reason}")]
    Guest { kernel: String, reason: String },
}

impl Vm {
    /// A machine booting `kernel` (a bzImage/vmlinuz) with `init` as `/init`: a binary that
    /// calls [`guest::run_as_init`] when it is pid 1, carried with its libraries.
    pub fn new(kernel: &Path, init: &Path) -> Self {
        Self {
            kernel: kernel.to_owned(),
            init: init.to_owned(),
            binaries: Vec::new(),
            files: Vec::new(),
            steps: Vec::new(),
            timeout: Duration::from_secs(120),
        }
    }

    /// A host binary at `guest_path`, with its libraries and interpreter.
    pub fn with_binary(mut self, guest_path: &str, host: &Path) -> Self {
        self.binaries.push((guest_path.to_owned(), host.to_owned()));
        self
    }

    /// A file with these bytes at `guest_path`.
    pub fn with_file(mut self, guest_path: &str, bytes: Vec<u8>) -> Self {
        self.files.push((guest_path.to_owned(), bytes));
        self
    }

    /// A job: run `argv` in the guest, in order with the other jobs.
    pub fn job<S: Into<String>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        self.steps
            .push(Step::Job(argv.into_iter().map(Into::into).collect()));
        self
    }

    /// Send the guest file `guest_path` back (after the jobs added before this).
    pub fn fetch_file(mut self, guest_path: &str) -> Self {
        self.steps.push(Step::Fetch(guest_path.to_owned()));
        self
    }

    /// How long the whole boot may take before QEMU is killed (default 120 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Boots the machine and returns what the guest reported.
    ///
    /// A kernel that dies before the guest's init starts is booted again, up to
    /// [`BOOT_ATTEMPTS`] times in all: QEMU 7.2's TCG crashed 6.12 at boot now and then (see
    /// the `-cpu` in `boot`, which stopped it; this is the net under that fix), and nothing
    /// the jobs do runs before init, so another boot cannot change an answer. A failure after
    /// init started is never retried.
    pub fn run(&self) -> Result<Results, VmError> {
        let work = WorkDir::new()?;
        let initramfs = self.initramfs(&work)?;
        let initramfs_path = work.path.join("initramfs.cpio");
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&initramfs_path).map_err(io_at(&initramfs_path))?,
        );
        initramfs.write_to(&mut out)?;
        std::io::Write::flush(&mut out).map_err(io_at(&initramfs_path))?;
        drop(out);
        let initramfs_bytes = initramfs.size();
        let memory_mib = memory_for(initramfs_bytes);
        let mut attempt = 1;
        loop {
            match self.boot_once(&work, &initramfs_path, memory_mib) {
                Ok(mut results) => {
                    results.initramfs_bytes = initramfs_bytes;
                    results.boots = attempt;
                    return Ok(results);
                }
                Err(Attempt::KernelDied(_)) if attempt < BOOT_ATTEMPTS => attempt += 1,
                Err(Attempt::KernelDied(e)) => return Err(with_boots(e, attempt)),
                Err(Attempt::Failed(e)) => return Err(e),
            }
        }
    }

    fn boot_once(
        &self,
        work: &WorkDir,
        initramfs: &Path,
        memory_mib: u64,
    ) -> Result<Results, Attempt> {
        let console_path = work.path.join(format!("console-{}.log", work.next_id()));
        let started = Instant::now();
        let finished = self
            .boot(initramfs, &console_path, memory_mib)
            .map_err(Attempt::Failed)?;
        let wall = started.elapsed();
        let console = std::fs::read(&console_path)
            .map_err(io_at(&console_path))
            .map_err(Attempt::Failed)?;
        keep_console(&self.kernel, &console_path, &console);
        let console = String::from_utf8_lossy(&console);
        let report = parse_console(&self.kernel_name(), &console, &self.steps);
        let stage = match report {
            Ok(parsed) => {
                return Ok(Results {
                    release: parsed.release,
                    jobs: parsed.jobs,
                    files: parsed.files,
                    wall,
                    initramfs_bytes: 0,
                    memory_mib,
                    boots: 1,
                });
            }
            Err(Unfinished::Error(e)) => return Err(Attempt::Failed(e)),
            Err(Unfinished::Stage(stage)) => stage,
        };
        let died_before_init = matches!(stage, Stage::NoInit) && kernel_died(&console);
        let error = self.unfinished(&stage, finished, &console);
        match died_before_init {
            true => Err(Attempt::KernelDied(error)),
            false => Err(Attempt::Failed(error)),
        }
    }

    /// The error for a guest that gave no complete report: QEMU exited, or was killed.
    fn unfinished(&self, stage: &Stage, qemu_exited: bool, console: &str) -> VmError {
        let (kernel, stage, tail) = (self.kernel_name(), stage.to_string(), tail(console));
        match qemu_exited {
            true => VmError::Incomplete {
                kernel,
                stage,
                tail,
            },
            false => VmError::TimedOut {
                kernel,
                seconds: self.timeout.as_secs(),
                stage,
                tail,
            },
        }
    }

    fn kernel_name(&self) -> String {
        self.kernel.display().to_string()
    }

    fn initramfs(&self, work: &WorkDir) -> Result<Initramfs, VmError> {
        let mut archive = Initramfs::with_skeleton();
        archive.binary("/init", &stripped(&self.init, work)?)?;
        for (guest_path, host) in &self.binaries {
            archive.binary(guest_path, &stripped(host, work)?)?;
        }
        for (guest_path, bytes) in &self.files {
            archive.file(guest_path, 0o644, bytes.clone());
        }
        let plan = guest::encode_plan(&self.steps);
        archive.file(guest::PLAN_PATH, 0o644, plan.into_bytes());
        Ok(archive)
    }

    /// Runs QEMU until it exits (true) or the timeout kills it (false).
    fn boot(&self, initramfs: &Path, console: &Path, memory_mib: u64) -> Result<bool, VmError> {
        let mut qemu = Command::new(QEMU);
        qemu.args(["-accel", "tcg", "-m"])
            .arg(memory_mib.to_string())
            .args(["-smp", "1", "-nodefaults", "-display", "none", "-no-reboot"])
            // Without CMPXCHG16B: QEMU 7.2's TCG gets SLUB's lockless fast path (a cmpxchg16b
            // on a %gs address) wrong now and then, and 6.12 double-faults in
            // kmem_cache_alloc about one boot in four under load; without the instruction the
            // kernel takes its locked path (0 crashes in 12 boots). bpf() does not use it.
            .args(["-cpu", "qemu64,-cx16"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(initramfs)
            .args(["-append", "console=ttyS0 quiet panic=-1"])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .args(["-monitor", "none"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = qemu.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => VmError::QemuMissing,
            _ => VmError::Io {
                path: QEMU.into(),
                source: e,
            },
        })?;
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(status) = child.try_wait().map_err(io_at(Path::new(QEMU)))? {
                if !status.success() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                    }
                    return Err(VmError::Io {
                        path: QEMU.into(),
                        source: std::io::Error::other(format!(
                            "exited with {status}: {}",
                            stderr.trim()
                        )),
                    });
                }
                return Ok(true);
            }
            if Instant::now() >= deadline {
                // Killing our own child by its handle; the wait reaps it.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// With `BPFEMU_VM_CONSOLE_DIR` set, a copy of each boot's whole console in that directory,
/// for the boot messages an error's last lines leave out (a panic's backtrace).
fn keep_console(kernel: &Path, console_path: &Path, console: &[u8]) {
    let Some(dir) = std::env::var_os("BPFEMU_VM_CONSOLE_DIR") else {
        return;
    };
    let kernel = kernel.file_name().unwrap_or_default().to_string_lossy();
    let boot = console_path
        .parent()
        .and_then(Path::file_name)
        .unwrap_or_default();
    let attempt = console_path.file_stem().unwrap_or_default();
    let path = Path::new(&dir).join(format!(
        "{kernel}.{}.{}.log",
        boot.to_string_lossy(),
        attempt.to_string_lossy()
    ));
    if let Err(e) = std::fs::write(&path, console) {
        eprintln!("BPFEMU_VM_CONSOLE_DIR: {}: {e}", path.display());
    }
}

/// RAM for a guest with this initramfs: the archive is in memory twice while the kernel
/// unpacks it (the loaded image and the files), plus what the kernel itself needs.
pub fn memory_for(initramfs_bytes: u64) -> u64 {
    BASE_MEMORY_MIB + 2 * initramfs_bytes.div_ceil(1 << 20)
}

/// A copy of `binary` without debug sections when `strip` is installed (a debug build's
/// binary is mostly DWARF: 160 MB become 30), else the binary itself.
fn stripped(binary: &Path, work: &WorkDir) -> Result<PathBuf, VmError> {
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "binary".into());
    let copy = work.path.join(format!("{}-{name}", work.next_id()));
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&copy)
        .arg(binary)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => Ok(copy),
        _ => {
            std::fs::metadata(binary).map_err(io_at(binary))?;
            Ok(binary.to_owned())
        }
    }
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> VmError + '_ {
    move |source| VmError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The console's last words, for an error message: the kernel's panic line when it panicked
/// (its backtrace follows it), else the last three lines.
fn tail(console: &str) -> String {
    let lines: Vec<&str> = console
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .collect();
    if let Some(panic) = lines
        .iter()
        .find(|l| l.contains("Kernel panic - not syncing"))
    {
        return (*panic).to_owned();
    }
    let start = lines.len().saturating_sub(3);
    let text = lines[start..].join(" | ");
    if text.is_empty() {
        "(nothing)".into()
    } else {
        text
    }
}

/// A scratch directory for one boot, removed when dropped.
struct WorkDir {
    path: PathBuf,
    counter: std::cell::Cell<u32>,
}

impl WorkDir {
    fn new() -> Result<Self, VmError> {
        static BOOTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("bpfemu-vm-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(io_at(&path))?;
        Ok(Self {
            path,
            counter: std::cell::Cell::new(0),
        })
    }

    fn next_id(&self) -> u32 {
        let id = self.counter.get();
        self.counter.set(id + 1);
        id
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

struct Parsed {
    release: String,
    jobs: Vec<JobResult>,
    files: BTreeMap<String, Result<Vec<u8>, String>>,
}

/// Why the console holds no complete report: how far the guest got, or an error.
enum Unfinished {
    Stage(Stage),
    Error(VmError),
}

/// How far an unfinished guest got.
enum Stage {
    /// Init never wrote its first record: the kernel did not get that far.
    NoInit,
    /// Init started; what it was doing.
    Running(String),
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::NoInit => f.write_str("the guest's init never started"),
            Stage::Running(what) => f.write_str(what),
        }
    }
}

/// Reads the guest's records out of the console.
fn parse_console(kernel: &str, console: &str, steps: &[Step]) -> Result<Parsed, Unfinished> {
    let mut reader = RecordReader::new(kernel, steps);
    for (number, line) in console.lines().enumerate() {
        match frame::scan_line(line) {
            Scanned::Other => {}
            Scanned::Corrupt => {
                return Err(Unfinished::Error(VmError::Garbled {
                    kernel: kernel.into(),
                    line: number + 1,
                    reason: "a record whose checksum does not match (something wrote into it)"
                        .into(),
                }));
            }
            Scanned::Record(fields) => {
                if reader
                    .take(&fields)
                    .map_err(|reason| garbled(kernel, number, reason))?
                {
                    return reader.finish().map_err(Unfinished::Error);
                }
            }
        }
    }
    Err(Unfinished::Stage(reader.stage()))
}

fn garbled(kernel: &str, number: usize, reason: String) -> Unfinished {
    Unfinished::Error(VmError::Garbled {
        kernel: kernel.into(),
        line: number + 1,
        reason,
    })
}

/// Assembles results record by record.
struct RecordReader<'a> {
    kernel: &'a str,
    steps: &'a [Step],
    records: u64,
    started: bool,
    release: Option<String>,
    current: Option<usize>,
    outputs: BTreeMap<usize, (Vec<u8>, Vec<u8>)>,
    statuses: BTreeMap<usize, JobStatus>,
    files: BTreeMap<String, Result<Vec<u8>, String>>,
    file_bytes: BTreeMap<usize, Vec<u8>>,
    guest_error: Option<String>,
}

impl<'a> RecordReader<'a> {
    fn new(kernel: &'a str, steps: &'a [Step]) -> Self {
        Self {
            kernel,
            steps,
            records: 0,
            started: false,
            release: None,
            current: None,
            outputs: BTreeMap::new(),
            statuses: BTreeMap::new(),
            files: BTreeMap::new(),
            file_bytes: BTreeMap::new(),
            guest_error: None,
        }
    }

    /// Takes one record; true once `done` arrived.
    fn take(&mut self, fields: &[String]) -> Result<bool, String> {
        let words: Vec<&str> = fields.iter().map(String::as_str).collect();
        let text = |b64: &str| {
            frame::base64_decode(b64)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .ok_or_else(|| format!("bad base64 in {:?}", words[0]))
        };
        match words.as_slice() {
            ["start"] => self.started = true,
            ["release", b64] => self.release = Some(text(b64)?),
            ["job-start", i] => self.current = Some(self.index(i)?),
            ["stdout", i, b64] | ["stderr", i, b64] => {
                let bytes = frame::base64_decode(b64).ok_or("bad base64 in output")?;
                let entry = self.outputs.entry(self.index(i)?).or_default();
                let stream = if words[0] == "stdout" {
                    &mut entry.0
                } else {
                    &mut entry.1
                };
                stream.extend_from_slice(&bytes);
            }
            ["job-end", i, status] => {
                let status = parse_status(status).ok_or("bad job status")?;
                self.statuses.insert(self.index(i)?, status);
                self.current = None;
            }
            ["job-fail", i, b64] => {
                let why = text(b64)?;
                self.statuses
                    .insert(self.index(i)?, JobStatus::NotStarted(why));
                self.current = None;
            }
            ["file", i, b64] => {
                let bytes = frame::base64_decode(b64).ok_or("bad base64 in file")?;
                let i = self.index(i)?;
                self.file_bytes.entry(i).or_default().extend(bytes);
            }
            ["file-end", i] => {
                let i = self.index(i)?;
                let bytes = self.file_bytes.remove(&i).unwrap_or_default();
                self.files.insert(self.fetched_path(i)?, Ok(bytes));
            }
            ["file-fail", i, b64] => {
                let i = self.index(i)?;
                self.files.insert(self.fetched_path(i)?, Err(text(b64)?));
            }
            ["error", b64] => self.guest_error = Some(text(b64)?),
            ["done", count] => {
                if count.parse::<u64>().ok() != Some(self.records) {
                    return Err(format!(
                        "the guest wrote {count} records, {} arrived intact",
                        self.records
                    ));
                }
                return Ok(true);
            }
            _ => return Err(format!("unknown record {:?}", words.first())),
        }
        self.records += 1;
        Ok(false)
    }

    fn index(&self, word: &str) -> Result<usize, String> {
        word.parse::<usize>()
            .ok()
            .filter(|&i| i < self.steps.len())
            .ok_or_else(|| format!("step index {word} out of range"))
    }

    fn fetched_path(&self, i: usize) -> Result<String, String> {
        match &self.steps[i] {
            Step::Fetch(path) => Ok(path.clone()),
            Step::Job(_) => Err(format!("step {i} is a job, not a fetch")),
        }
    }

    /// How far the guest got, for a run that never finished.
    fn stage(&self) -> Stage {
        if !self.started {
            return Stage::NoInit;
        }
        let what = match (self.current, &self.release) {
            (Some(i), _) => match &self.steps[i] {
                Step::Job(argv) => format!("still running job {} ({})", i + 1, argv.join(" ")),
                Step::Fetch(path) => format!("still sending {path}"),
            },
            (None, None) => "init started but never reported the release".into(),
            (None, Some(_)) => format!(
                "{} of {} jobs reported",
                self.statuses.len(),
                self.job_count()
            ),
        };
        Stage::Running(what)
    }

    fn job_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Job(_)))
            .count()
    }

    fn finish(mut self) -> Result<Parsed, VmError> {
        if let Some(reason) = self.guest_error.take() {
            return Err(VmError::Guest {
                kernel: self.kernel.into(),
                reason,
            });
        }
        let mut jobs = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            let Step::Job(argv) = step else { continue };
            let status = self.statuses.remove(&i).ok_or_else(|| VmError::Guest {
                kernel: self.kernel.into(),
                reason: format!("job {} ({}) never reported", i + 1, argv.join(" ")),
            })?;
            let (stdout, stderr) = self.outputs.remove(&i).unwrap_or_default();
            jobs.push(JobResult {
                argv: argv.clone(),
                status,
                stdout,
                stderr,
            });
        }
        Ok(Parsed {
            release: self.release.unwrap_or_default(),
            jobs,
            files: self.files,
        })
    }
}

fn parse_status(word: &str) -> Option<JobStatus> {
    let (kind, value) = word.split_once(':')?;
    let value = value.parse().ok()?;
    match kind {
        "exit" => Some(JobStatus::Exited(value)),
        "signal" => Some(JobStatus::Signaled(value)),
        _ => None,
    }
}
