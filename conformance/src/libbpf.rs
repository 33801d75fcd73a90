//! libbpf 1.7 (vendored through libbpf-sys) as the loader oracle: the object, its programs and
//! maps as libbpf sees them, the exact instruction streams libbpf hands to `BPF_PROG_LOAD`, and
//! the kernel's answer (program fds, verifier logs, `BPF_PROG_TEST_RUN`).
//!
//! bpfemu's loader claims to do what libbpf does; this module is what that claim is checked
//! against. It is a thin, safe layer: every libbpf pointer lives inside [`LibbpfObject`], which
//! closes the object (and with it every program and map fd) on drop.
//!
//! # The prepared instruction stream
//! [`LibbpfObject::prepare`] calls `bpf_object__prepare()`, which libbpf 1.7 exports as the
//! first half of `bpf_object__load()`: it probes kernel features, loads vmlinux BTF, resolves
//! externs (kfuncs, ksyms, kconfig), sanitizes maps, applies CO-RE relocations, appends
//! subprograms and relocates calls and data references, loads the object BTF, creates the maps
//! (map fds now exist) and sanitizes helper calls. After it, `bpf_program__insns()` is documented
//! to return the final instructions. The second half, `bpf_object__load_progs()`, passes
//! `prog->insns` to `bpf_prog_load()` unchanged: the only hook that may swap them is a
//! section definition's `prog_prepare_load_fn`, and libbpf's own (`libbpf_prepare_prog_load`)
//! only edits load attributes. libbpf keeps `prog->insns` after loading (only
//! `bpf_object__close` frees them), so [`LibbpfObject::load`] re-reads them and records whether
//! they still equal the snapshot ([`LoadOutcome::insns_unchanged`]): the test suite checks that
//! the streams compared with bpfemu's loader are the very ones the kernel accepted.
//!
//! # Normalisation
//! A map reference in libbpf's stream holds a map fd, which means nothing outside this process.
//! [`PreparedProgram::insns`] rewrites it to the map's index in libbpf's map order
//! (`bpf_object__next_map`), the convention of `bpfemu_loader::Object`: an `ld_imm64` with
//! src_reg 1 (`BPF_PSEUDO_MAP_FD`) gets `imm = index`, one with src_reg 2
//! (`BPF_PSEUDO_MAP_VALUE`) gets `imm = index` and keeps the value offset in the second slot.
//! Kfunc calls (`call` with src_reg 2) keep `imm` = BTF id and `off` = fd-array index (0 for
//! vmlinux); `ld_imm64` ksyms (src_reg 3) keep the BTF id and the BTF object fd (0 for vmlinux).
//!
//! # Printing
//! libbpf prints through one process-global callback (`libbpf_set_print`). Every libbpf call
//! here runs under a process-global lock with a capturing callback installed, and restores the
//! previous callback afterwards, so concurrent tests neither interleave nor lose messages.
//!
//! ```no_run
//! use bpfemu_conformance::libbpf::{LibbpfObject, LogOptions};
//! let mut obj = LibbpfObject::open_file("examples/xdp/build/router.v3.o".as_ref()).unwrap();
//! let prepared = obj.prepare().unwrap();
//! println!("{} insns in {}", prepared[0].insns.len(), prepared[0].name);
//! let outcome = obj.load(&LogOptions::default());
//! assert!(outcome.result.is_ok(), "{}", outcome.programs[0].log);
//! ```

use bpfemu_isa::RawInsn;
use libbpf_sys as sys;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// `BPF_LD | BPF_IMM | BPF_DW`: the first slot of an `ld_imm64`.
const LD_IMM64: u8 = 0x18;
/// `ld_imm64` src_reg: the immediate is a map fd.
pub const PSEUDO_MAP_FD: u8 = 1;
/// `ld_imm64` src_reg: a map fd, plus an offset into its value in the next slot's immediate.
pub const PSEUDO_MAP_VALUE: u8 = 2;

/// Errors from libbpf, with what libbpf printed while failing.
#[derive(Debug, thiserror::Error)]
pub enum LibbpfError {
    #[error(
        "{name}: libbpf could not open the object (errno {errno}): {}",
        last_warning(messages)
    )]
    Open {
        name: String,
        errno: i32,
        messages: Vec<Message>,
    },
    #[error(
        "{name}: bpf_object__prepare failed (errno {errno}): {}",
        last_warning(messages)
    )]
    Prepare {
        name: String,
        errno: i32,
        messages: Vec<Message>,
    },
    #[error("{name}: {what} is not accepted in this state (errno {errno})")]
    Busy {
        name: String,
        what: String,
        errno: i32,
    },
    #[error("{name}: no program or map named {item:?}")]
    NotFound { name: String, item: String },
    #[error("{name}: a name or path contains a NUL byte")]
    Nul { name: String },
    #[error(
        "{name}: program {program}, insn {pc}: ld_imm64 refers to fd {fd}, not a map of the object"
    )]
    UnknownMapFd {
        name: String,
        program: String,
        pc: usize,
        fd: i32,
    },
}

fn last_warning(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.level == Level::Warn)
        .map_or_else(String::new, |m| m.text.trim_end().to_string())
}

// ---------------------------------------------------------------------------------------------
// Capturing libbpf's output

/// A libbpf message level (`enum libbpf_print_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warn,
    Info,
    Debug,
}

/// One line (or block) libbpf printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub level: Level,
    pub text: String,
}

/// Serializes every libbpf call that can print, because the print callback is process-global.
static LIBBPF_LOCK: Mutex<()> = Mutex::new(());
/// What the capturing callback collected since the current capture began.
static CAPTURED: Mutex<Vec<Message>> = Mutex::new(Vec::new());

unsafe extern "C" {
    /// glibc's `vsnprintf`, declared with libbpf-sys's `va_list` type so the callback's argument
    /// passes straight through.
    fn vsnprintf(
        buf: *mut c_char,
        size: usize,
        fmt: *const c_char,
        ap: *mut sys::__va_list_tag,
    ) -> c_int;
}

/// Longest message kept; a `va_list` can be consumed only once, so longer ones are truncated.
const MESSAGE_MAX: usize = 64 << 10;

unsafe extern "C" fn capture_print(
    level: sys::libbpf_print_level,
    fmt: *const c_char,
    ap: *mut sys::__va_list_tag,
) -> c_int {
    let mut buf = vec![0u8; MESSAGE_MAX];
    // SAFETY: libbpf passes a valid format string and the matching, unconsumed va_list; `buf`
    // is writable for `buf.len()` bytes and vsnprintf writes at most that many, NUL included.
    let n = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, ap) };
    let len = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    let level = match level {
        sys::LIBBPF_WARN => Level::Warn,
        sys::LIBBPF_INFO => Level::Info,
        _ => Level::Debug,
    };
    let text = String::from_utf8_lossy(&buf[..len]).into_owned();
    lock(&CAPTURED).push(Message { level, text });
    n
}

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Holds the libbpf lock with the capturing callback installed; restores the previous
/// callback when dropped.
struct PrintCapture {
    previous: sys::libbpf_print_fn_t,
    _guard: MutexGuard<'static, ()>,
}

impl PrintCapture {
    fn begin() -> Self {
        let guard = lock(&LIBBPF_LOCK);
        lock(&CAPTURED).clear();
        // SAFETY: the callback is a plain function valid for the program's lifetime; we hold
        // LIBBPF_LOCK, so no other capture is swapping the global callback concurrently.
        let previous = unsafe { sys::libbpf_set_print(Some(capture_print)) };
        PrintCapture {
            previous,
            _guard: guard,
        }
    }

    fn take(&self) -> Vec<Message> {
        std::mem::take(&mut *lock(&CAPTURED))
    }
}

impl Drop for PrintCapture {
    fn drop(&mut self) {
        // SAFETY: restores the callback that was installed before `begin`, still under the lock.
        unsafe { sys::libbpf_set_print(self.previous) };
    }
}

/// Runs `f` with libbpf's output captured; returns its result and the messages.
fn captured<R>(f: impl FnOnce() -> R) -> (R, Vec<Message>) {
    let capture = PrintCapture::begin();
    let result = f();
    (result, capture.take())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A C string from libbpf (never NULL for the getters used here), as an owned String.
fn owned(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: libbpf returns NUL-terminated strings owned by the object, alive during this call.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// The object

/// A program as libbpf describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramInfo {
    pub name: String,
    pub section: String,
    /// `enum bpf_prog_type`.
    pub prog_type: u32,
    /// `enum bpf_attach_type` (0 when the section implies none).
    pub expected_attach_type: u32,
    pub autoload: bool,
    /// The instructions libbpf holds now: the ELF section's before `prepare`, the final stream
    /// after it (with map fds; see [`PreparedProgram`] for the comparable form).
    pub insns: Vec<RawInsn>,
}

/// A map as libbpf describes it (after `prepare`, as it was created).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapInfo {
    pub name: String,
    /// `enum bpf_map_type`.
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub numa_node: u32,
    pub map_extra: u64,
    pub ifindex: u32,
}

/// A program's final instruction stream, in the form bpfemu's loader produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedProgram {
    pub name: String,
    pub section: String,
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// Map references rewritten to map indices (see the module docs).
    pub insns: Vec<RawInsn>,
    /// Exactly what libbpf passes to `BPF_PROG_LOAD`, map fds included.
    pub raw_insns: Vec<RawInsn>,
    /// The func_info records libbpf passes: (insn_off, type_id).
    pub func_info: Vec<(u32, u32)>,
    /// The line_info records libbpf passes: insn_off, file_name_off, line_off, line_col.
    pub line_info: Vec<[u32; 4]>,
}

/// Verifier log settings applied to every program by [`LibbpfObject::load`].
#[derive(Clone, Copy, Debug)]
pub struct LogOptions {
    /// `log_level` bits (see [`bpfemu_kernel::BPF_LOG_LEVEL1`] and friends); with 0, libbpf
    /// still retries a failed load at level 1 into the same buffer.
    pub level: u32,
    /// Bytes per program. The kernel fails a load with ENOSPC when the log does not fit, and
    /// libbpf does not grow a caller's buffer, so this must be generous.
    pub size: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            level: bpfemu_kernel::BPF_LOG_LEVEL1 | bpfemu_kernel::BPF_LOG_STATS,
            size: 16 << 20,
        }
    }
}

/// One program's verifier log after [`LibbpfObject::load`].
#[derive(Clone, Debug)]
pub struct ProgramLog {
    pub name: String,
    /// Whether the kernel returned a program fd.
    pub loaded: bool,
    pub log: String,
}

/// What `bpf_object__load` did. A rejected program is an answer, not an error of this API.
#[derive(Clone, Debug)]
pub struct LoadOutcome {
    /// `Err(errno)` when libbpf or the kernel refused the object.
    pub result: Result<(), i32>,
    /// One entry per autoloaded program, in libbpf's order.
    pub programs: Vec<ProgramLog>,
    /// What libbpf printed during preparation and loading.
    pub messages: Vec<Message>,
    /// Whether every program's instructions after loading equal the prepared snapshot.
    pub insns_unchanged: bool,
}

impl LoadOutcome {
    /// The last `lines` lines of every program log that did not load, for failure messages.
    pub fn failure_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        for p in self.programs.iter().filter(|p| !p.loaded) {
            let all: Vec<&str> = p.log.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            out.push_str(&format!(
                "--- {} (verifier log tail)\n{}\n",
                p.name,
                tail.join("\n")
            ));
        }
        for m in self.messages.iter().filter(|m| m.level == Level::Warn) {
            out.push_str(&format!("libbpf: {}", m.text));
        }
        out
    }
}

/// A libbpf `bpf_object`, closed (programs unloaded, maps and fds released) on drop.
pub struct LibbpfObject {
    obj: NonNull<sys::bpf_object>,
    name: String,
    /// The snapshot taken by `prepare`, in libbpf's program order.
    prepared: Option<Vec<PreparedProgram>>,
    /// Per-program verifier log buffers; libbpf keeps pointers to them until the load is done.
    log_bufs: Vec<Vec<u8>>,
    /// What libbpf printed during `prepare`.
    prepare_messages: Vec<Message>,
    /// Whether `bpf_object__prepare` succeeded (the snapshot may still have failed).
    object_prepared: bool,
}

// SAFETY: a bpf_object has no thread affinity (no thread-local state), and the type is Send but
// not Sync, so one thread at a time uses it; the calls that touch libbpf's process-global state
// (printing, feature probing in prepare/load) run under the global libbpf lock.
unsafe impl Send for LibbpfObject {}

impl LibbpfObject {
    /// Opens an ELF object file (`bpf_object__open_file`).
    pub fn open_file(path: &Path) -> Result<Self, LibbpfError> {
        let name = path.display().to_string();
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| LibbpfError::Nul { name: name.clone() })?;
        let opts = open_opts(None);
        // SAFETY: `c_path` and `opts` are valid for the call; libbpf copies what it keeps.
        let (ptr, messages) =
            captured(|| unsafe { sys::bpf_object__open_file(c_path.as_ptr(), &opts) });
        Self::opened(name, ptr, messages)
    }

    /// Opens an object from memory (`bpf_object__open_mem`); `name` becomes the object name
    /// libbpf derives map names from (like a file name, e.g. `router.v3.o`).
    pub fn open_bytes(name: &str, bytes: &[u8]) -> Result<Self, LibbpfError> {
        let c_name = CString::new(name).map_err(|_| LibbpfError::Nul { name: name.into() })?;
        let opts = open_opts(Some(&c_name));
        // SAFETY: `bytes` and `opts` are valid for the call; libbpf copies the ELF image and the
        // object name during open, keeping no pointer into either.
        let (ptr, messages) = captured(|| unsafe {
            sys::bpf_object__open_mem(bytes.as_ptr().cast(), bytes.len() as sys::size_t, &opts)
        });
        Self::opened(name.to_string(), ptr, messages)
    }

    fn opened(
        name: String,
        ptr: *mut sys::bpf_object,
        messages: Vec<Message>,
    ) -> Result<Self, LibbpfError> {
        let Some(obj) = NonNull::new(ptr) else {
            return Err(LibbpfError::Open {
                name,
                errno: errno(),
                messages,
            });
        };
        Ok(LibbpfObject {
            obj,
            name,
            prepared: None,
            object_prepared: false,
            log_bufs: Vec::new(),
            prepare_messages: Vec::new(),
        })
    }

    /// The name given at open (the path, or `open_bytes`'s name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Entry programs (libbpf hides subprograms), in libbpf's order.
    pub fn programs(&self) -> Vec<ProgramInfo> {
        self.prog_ptrs().into_iter().map(program_info).collect()
    }

    /// Maps, including the internal ones for global data and `.kconfig`, in libbpf's order.
    pub fn maps(&self) -> Vec<MapInfo> {
        self.map_ptrs().into_iter().map(map_info).collect()
    }

    /// Sets a map's `max_entries` before the maps are created.
    pub fn set_max_entries(&mut self, map: &str, max_entries: u32) -> Result<(), LibbpfError> {
        let ptr = self.find_map(map)?;
        // SAFETY: `ptr` is a map of this live object.
        let rc = unsafe { sys::bpf_map__set_max_entries(ptr, max_entries) };
        self.busy_check(rc, "set_max_entries")
    }

    /// Turns loading of one program on or off (before `prepare`).
    pub fn set_autoload(&mut self, program: &str, on: bool) -> Result<(), LibbpfError> {
        let ptr = self.find_prog(program)?;
        // SAFETY: `ptr` is a program of this live object.
        let rc = unsafe { sys::bpf_program__set_autoload(ptr, on) };
        self.busy_check(rc, "set_autoload")
    }

    /// Sets a program's type and expected attach type before `prepare`, for objects whose
    /// section names say nothing (or something else): `bpf_program__set_type` and
    /// `bpf_program__set_expected_attach_type`.
    pub fn set_program_type(
        &mut self,
        program: &str,
        prog_type: u32,
        expected_attach_type: u32,
    ) -> Result<(), LibbpfError> {
        let ptr = self.find_prog(program)?;
        // SAFETY: `ptr` is a program of this live object.
        let rc = unsafe { sys::bpf_program__set_type(ptr, prog_type) };
        self.busy_check(rc, "set_type")?;
        // SAFETY: as above.
        let rc = unsafe { sys::bpf_program__set_expected_attach_type(ptr, expected_attach_type) };
        self.busy_check(rc, "set_expected_attach_type")
    }

    /// Replaces a global data map's initial contents (`bpf_map__set_initial_value`), before
    /// `prepare`: the only way to configure `.rodata`, which libbpf freezes when it creates it.
    /// `data` must be the whole section (the map's value size).
    pub fn set_initial_value(&mut self, map: &str, data: &[u8]) -> Result<(), LibbpfError> {
        let ptr = self.find_map(map)?;
        // SAFETY: `ptr` is a map of this live object; libbpf copies `data` (valid for its
        // length) into the map's own buffer.
        let rc = unsafe {
            sys::bpf_map__set_initial_value(ptr, data.as_ptr().cast(), data.len() as sys::size_t)
        };
        self.busy_check(rc, "set_initial_value")
    }

    /// `BPF_MAP_UPDATE_ELEM` on a created map, by name; `value` has the syscall-side size (per-CPU
    /// maps: one copy per possible CPU, each padded to 8 bytes). The errno on failure.
    pub fn map_update(&self, map: &str, key: &[u8], value: &[u8], flags: u64) -> Result<(), i32> {
        map_update_fd(self.map_fd(map).ok_or(libc::ENOENT)?, key, value, flags)
    }

    /// Runs `bpf_object__prepare` (see the module docs) and returns every autoloaded program's
    /// final stream. Maps exist in the kernel afterwards; nothing is pinned. Idempotent.
    pub fn prepare(&mut self) -> Result<Vec<PreparedProgram>, LibbpfError> {
        if let Some(p) = &self.prepared {
            return Ok(p.clone());
        }
        self.prepare_object()?;
        let prepared = self.snapshot()?;
        self.prepared = Some(prepared.clone());
        Ok(prepared)
    }

    /// `bpf_object__prepare`, once.
    fn prepare_object(&mut self) -> Result<(), LibbpfError> {
        if self.object_prepared {
            return Ok(());
        }
        self.unpin_all();
        // SAFETY: the object is open and not yet prepared.
        let (rc, messages) = captured(|| unsafe { sys::bpf_object__prepare(self.obj.as_ptr()) });
        if rc != 0 {
            return Err(LibbpfError::Prepare {
                name: self.name.clone(),
                errno: -rc,
                messages,
            });
        }
        self.prepare_messages = messages;
        self.object_prepared = true;
        Ok(())
    }

    /// Loads every autoloaded program into the kernel (`bpf_object__load`), preparing first if
    /// needed, with a verifier log per program.
    pub fn load(&mut self, log: &LogOptions) -> LoadOutcome {
        // A stream that cannot be snapshot (an `ld_imm64` holding an fd written in the object,
        // which libbpf passes to the kernel as it stands) still loads, as libbpf loads it.
        match self.prepare() {
            Ok(_) | Err(LibbpfError::UnknownMapFd { .. }) => {}
            Err(e) => return self.failed_prepare(e),
        }
        let mut messages = self.prepare_messages.clone();
        self.install_logs(log);
        // SAFETY: the object is prepared and not loaded; the log buffers installed above live in
        // `self.log_bufs` until the object is closed.
        let (rc, load_messages) = captured(|| unsafe { sys::bpf_object__load(self.obj.as_ptr()) });
        messages.extend(load_messages);
        LoadOutcome {
            result: if rc == 0 { Ok(()) } else { Err(-rc) },
            programs: self.collect_logs(),
            messages,
            insns_unchanged: self.insns_unchanged(),
        }
    }

    /// A loaded program's fd (owned by the object).
    pub fn program_fd(&self, program: &str) -> Option<BorrowedFd<'_>> {
        let ptr = self.find_prog(program).ok()?;
        // SAFETY: `ptr` is a program of this live object.
        borrowed(unsafe { sys::bpf_program__fd(ptr) })
    }

    /// Whether the object's BTF is in the kernel after loading (libbpf goes on without it
    /// when the kernel refuses it).
    pub fn btf_in_kernel(&self) -> bool {
        // SAFETY: the object is live.
        unsafe { sys::bpf_object__btf_fd(self.obj.as_ptr()) >= 0 }
    }

    /// A created map's fd (owned by the object).
    pub fn map_fd(&self, map: &str) -> Option<BorrowedFd<'_>> {
        let ptr = self.find_map(map).ok()?;
        // SAFETY: `ptr` is a map of this live object.
        borrowed(unsafe { sys::bpf_map__fd(ptr) })
    }

    fn failed_prepare(&self, e: LibbpfError) -> LoadOutcome {
        let (errno, messages) = match e {
            LibbpfError::Prepare {
                errno, messages, ..
            } => (errno, messages),
            other => (
                libc::EINVAL,
                vec![Message {
                    level: Level::Warn,
                    text: other.to_string(),
                }],
            ),
        };
        LoadOutcome {
            result: Err(errno),
            programs: Vec::new(),
            messages,
            insns_unchanged: true,
        }
    }

    fn prog_ptrs(&self) -> Vec<*mut sys::bpf_program> {
        let mut out = Vec::new();
        let mut prev = std::ptr::null_mut();
        loop {
            // SAFETY: `prev` is NULL or a program returned by the previous iteration.
            let next = unsafe { sys::bpf_object__next_program(self.obj.as_ptr(), prev) };
            if next.is_null() {
                return out;
            }
            out.push(next);
            prev = next;
        }
    }

    fn map_ptrs(&self) -> Vec<*mut sys::bpf_map> {
        let mut out = Vec::new();
        let mut prev: *const sys::bpf_map = std::ptr::null();
        loop {
            // SAFETY: `prev` is NULL or a map returned by the previous iteration.
            let next = unsafe { sys::bpf_object__next_map(self.obj.as_ptr(), prev) };
            if next.is_null() {
                return out;
            }
            out.push(next);
            prev = next;
        }
    }

    fn find_prog(&self, name: &str) -> Result<*mut sys::bpf_program, LibbpfError> {
        self.prog_ptrs()
            .into_iter()
            // SAFETY: each pointer is a program of this live object.
            .find(|&p| owned(unsafe { sys::bpf_program__name(p) }) == name)
            .ok_or_else(|| self.not_found(name))
    }

    fn find_map(&self, name: &str) -> Result<*mut sys::bpf_map, LibbpfError> {
        self.map_ptrs()
            .into_iter()
            // SAFETY: each pointer is a map of this live object.
            .find(|&m| owned(unsafe { sys::bpf_map__name(m) }) == name)
            .ok_or_else(|| self.not_found(name))
    }

    fn not_found(&self, item: &str) -> LibbpfError {
        LibbpfError::NotFound {
            name: self.name.clone(),
            item: item.to_string(),
        }
    }

    fn busy_check(&self, rc: c_int, what: &str) -> Result<(), LibbpfError> {
        if rc == 0 {
            return Ok(());
        }
        Err(LibbpfError::Busy {
            name: self.name.clone(),
            what: what.to_string(),
            errno: -rc,
        })
    }

    /// Clears every map's pin path, so `LIBBPF_PIN_BY_NAME` maps are neither reused from nor
    /// pinned to bpffs: the oracle must leave no trace and must not need bpffs mounted.
    fn unpin_all(&mut self) {
        for map in self.map_ptrs() {
            // SAFETY: `map` belongs to this object; NULL is libbpf's "no pin path".
            unsafe { sys::bpf_map__set_pin_path(map, std::ptr::null()) };
        }
    }

    /// The prepared streams, normalised against the map fds libbpf just created.
    fn snapshot(&self) -> Result<Vec<PreparedProgram>, LibbpfError> {
        let fd_index: HashMap<i32, usize> = self
            .map_ptrs()
            .into_iter()
            .enumerate()
            // SAFETY: each pointer is a map of this live object.
            .map(|(i, m)| (unsafe { sys::bpf_map__fd(m) }, i))
            .filter(|&(fd, _)| fd >= 0)
            .collect();
        self.programs()
            .into_iter()
            .filter(|p| p.autoload)
            .map(|p| self.prepared_program(p, &fd_index))
            .collect()
    }

    fn prepared_program(
        &self,
        p: ProgramInfo,
        fd_index: &HashMap<i32, usize>,
    ) -> Result<PreparedProgram, LibbpfError> {
        let insns =
            normalize_map_refs(&p.insns, |fd| fd_index.get(&fd).copied()).map_err(|(pc, fd)| {
                LibbpfError::UnknownMapFd {
                    name: self.name.clone(),
                    program: p.name.clone(),
                    pc,
                    fd,
                }
            })?;
        let (func_info, line_info) = self.ext_info(&p.name);
        Ok(PreparedProgram {
            name: p.name,
            section: p.section,
            prog_type: p.prog_type,
            expected_attach_type: p.expected_attach_type,
            insns,
            raw_insns: p.insns,
            func_info,
            line_info,
        })
    }

    /// The func_info and line_info records libbpf holds for program `name` once prepared.
    fn ext_info(&self, name: &str) -> (Vec<(u32, u32)>, Vec<[u32; 4]>) {
        let Some(prog) = self
            .prog_ptrs()
            .into_iter()
            // SAFETY: each pointer is a program of this live object.
            .find(|&p| owned(unsafe { sys::bpf_program__name(p) }) == name)
        else {
            return (Vec::new(), Vec::new());
        };
        // SAFETY: `prog` belongs to this live, prepared object; libbpf's arrays hold `cnt`
        // records of the uapi layout and live as long as the object.
        unsafe {
            let funcs = sys::bpf_program__func_info(prog);
            let n = sys::bpf_program__func_info_cnt(prog) as usize;
            let func_info = if funcs.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(funcs, n)
                    .iter()
                    .map(|f| (f.insn_off, f.type_id))
                    .collect()
            };
            let lines = sys::bpf_program__line_info(prog);
            let n = sys::bpf_program__line_info_cnt(prog) as usize;
            let line_info = if lines.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(lines, n)
                    .iter()
                    .map(|l| [l.insn_off, l.file_name_off, l.line_off, l.line_col])
                    .collect()
            };
            (func_info, line_info)
        }
    }

    fn install_logs(&mut self, log: &LogOptions) {
        self.log_bufs.clear();
        for prog in self.prog_ptrs() {
            let mut buf = vec![0u8; log.size.max(1)];
            // SAFETY: `prog` belongs to this unloaded object; `buf`'s heap block stays put when
            // the Vec moves into `self.log_bufs`, and lives until the object is closed.
            unsafe {
                sys::bpf_program__set_log_level(prog, log.level);
                sys::bpf_program__set_log_buf(
                    prog,
                    buf.as_mut_ptr().cast(),
                    buf.len() as sys::size_t,
                );
            }
            self.log_bufs.push(buf);
        }
    }

    fn collect_logs(&self) -> Vec<ProgramLog> {
        self.prog_ptrs()
            .into_iter()
            .zip(&self.log_bufs)
            // SAFETY: each pointer is a program of this live object.
            .filter(|&(p, _)| unsafe { sys::bpf_program__autoload(p) })
            .map(|(p, buf)| {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                ProgramLog {
                    // SAFETY: as above.
                    name: owned(unsafe { sys::bpf_program__name(p) }),
                    // SAFETY: as above.
                    loaded: unsafe { sys::bpf_program__fd(p) } >= 0,
                    log: String::from_utf8_lossy(&buf[..end]).into_owned(),
                }
            })
            .collect()
    }

    fn insns_unchanged(&self) -> bool {
        let Some(prepared) = &self.prepared else {
            return true;
        };
        let now: Vec<Vec<RawInsn>> = self
            .programs()
            .into_iter()
            .filter(|p| p.autoload)
            .map(|p| p.insns)
            .collect();
        now.len() == prepared.len() && now.iter().zip(prepared).all(|(a, b)| *a == b.raw_insns)
    }
}

impl Drop for LibbpfObject {
    fn drop(&mut self) {
        // SAFETY: the object is live and owned by us; closing it unloads programs, closes every
        // fd and frees all libbpf memory. Log buffers (fields) are freed only after this.
        let _ = captured(|| unsafe { sys::bpf_object__close(self.obj.as_ptr()) });
    }
}

fn open_opts(object_name: Option<&CStr>) -> sys::bpf_object_open_opts {
    sys::bpf_object_open_opts {
        sz: std::mem::size_of::<sys::bpf_object_open_opts>() as sys::size_t,
        object_name: object_name.map_or(std::ptr::null(), CStr::as_ptr),
        ..Default::default()
    }
}

fn borrowed<'a>(fd: c_int) -> Option<BorrowedFd<'a>> {
    // SAFETY: a non-negative fd from libbpf stays open until the object (which the caller's
    // borrow ties the lifetime to) is closed.
    (fd >= 0).then(|| unsafe { BorrowedFd::borrow_raw(fd) })
}

fn program_info(p: *mut sys::bpf_program) -> ProgramInfo {
    // SAFETY: `p` is a program of a live object; libbpf returns its own strings and an array
    // of `bpf_program__insn_cnt` 8-byte `struct bpf_insn`, laid out as the kernel's uapi.
    unsafe {
        ProgramInfo {
            name: owned(sys::bpf_program__name(p)),
            section: owned(sys::bpf_program__section_name(p)),
            prog_type: sys::bpf_program__type(p),
            expected_attach_type: sys::bpf_program__expected_attach_type(p),
            autoload: sys::bpf_program__autoload(p),
            insns: raw_insns(
                sys::bpf_program__insns(p),
                sys::bpf_program__insn_cnt(p) as usize,
            ),
        }
    }
}

/// Reads `cnt` uapi `struct bpf_insn` slots.
///
/// # Safety
/// `ptr` must be NULL or point to `cnt` readable instructions.
unsafe fn raw_insns(ptr: *const sys::bpf_insn, cnt: usize) -> Vec<RawInsn> {
    const _: () = assert!(std::mem::size_of::<sys::bpf_insn>() == 8);
    if ptr.is_null() || cnt == 0 {
        return Vec::new();
    }
    // SAFETY: the caller guarantees `cnt` instructions of 8 bytes each.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), cnt * 8) };
    RawInsn::parse_all(bytes).expect("a whole number of 8-byte slots")
}

fn map_info(m: *mut sys::bpf_map) -> MapInfo {
    // SAFETY: `m` is a map of a live object; the getters only read its definition.
    unsafe {
        MapInfo {
            name: owned(sys::bpf_map__name(m)),
            map_type: sys::bpf_map__type(m),
            key_size: sys::bpf_map__key_size(m),
            value_size: sys::bpf_map__value_size(m),
            max_entries: sys::bpf_map__max_entries(m),
            map_flags: sys::bpf_map__map_flags(m),
            numa_node: sys::bpf_map__numa_node(m),
            map_extra: sys::bpf_map__map_extra(m),
            ifindex: sys::bpf_map__ifindex(m),
        }
    }
}

/// Rewrites the map fds of map-referencing `ld_imm64`s through `index_of`; on an fd it does
/// not know, returns the instruction index and the fd.
pub fn normalize_map_refs(
    insns: &[RawInsn],
    index_of: impl Fn(i32) -> Option<usize>,
) -> Result<Vec<RawInsn>, (usize, i32)> {
    let mut out = insns.to_vec();
    let mut pc = 0;
    while pc < out.len() {
        let insn = &mut out[pc];
        if insn.code != LD_IMM64 {
            pc += 1;
            continue;
        }
        if insn.src == PSEUDO_MAP_FD || insn.src == PSEUDO_MAP_VALUE {
            let index = index_of(insn.imm).ok_or((pc, insn.imm))?;
            insn.imm = index as i32;
        }
        pc += 2;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Test runs, maps by fd, CPUs and clocks: the raw bpf() layer's, under the names the tests use

pub use bpfemu_kernel::{
    CpuPin, MapEntryBytes, TestRunOutput, XdpMd, boottime_ns, is_per_cpu_map, kernel_or_skip,
    map_delete_fd, map_entries_fd, map_lookup_fd, map_next_key_fd, map_update_fd, monotonic_ns,
    possible_cpus, sys_value_size, test_run, test_run_xdp,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_refs_become_indices_and_keep_value_offsets() {
        let insns = [
            RawInsn::new(LD_IMM64, 1, PSEUDO_MAP_FD, 0, 7),
            RawInsn::new(0, 0, 0, 0, 0),
            RawInsn::new(LD_IMM64, 2, PSEUDO_MAP_VALUE, 0, 9),
            RawInsn::new(0, 0, 0, 0, 16),
            RawInsn::new(LD_IMM64, 3, 0, 0, 7),
            RawInsn::new(0, 0, 0, 0, 0),
            RawInsn::new(0x95, 0, 0, 0, 0),
        ];
        let out = normalize_map_refs(&insns, |fd| {
            [(7, 0), (9, 1)].iter().find(|p| p.0 == fd).map(|p| p.1)
        })
        .unwrap();
        assert_eq!(out[0].imm, 0);
        assert_eq!((out[2].imm, out[3].imm), (1, 16));
        assert_eq!(
            out[4].imm, 7,
            "a plain 64-bit constant is not a map reference"
        );
        assert_eq!(normalize_map_refs(&insns[..2], |_| None), Err((0, 7)));
    }

    #[test]
    fn per_cpu_values_are_padded_per_possible_cpu() {
        assert_eq!(sys_value_size(2, 12, 4), 12);
        assert_eq!(sys_value_size(6, 12, 4), 64);
        assert_eq!(sys_value_size(10, 8, 3), 24);
    }

    #[test]
    fn maps_by_fd_iterate_update_and_delete() {
        use bpfemu_kernel::{self as kernel, MapSpec};
        if !kernel_or_skip("maps_by_fd") {
            return;
        }
        let map = kernel::map_create(&MapSpec::hash(4, 8, 16)).expect("hash map");
        let fd = std::os::fd::AsFd::as_fd(&map);
        for k in 0u32..3 {
            map_update_fd(fd, &k.to_ne_bytes(), &u64::from(k * 10).to_ne_bytes(), 0).unwrap();
        }
        let mut entries = map_entries_fd(fd, 4, 8, 100).unwrap();
        entries.sort();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2].1, 20u64.to_ne_bytes());
        map_delete_fd(fd, &1u32.to_ne_bytes()).unwrap();
        assert_eq!(map_lookup_fd(fd, &1u32.to_ne_bytes(), 8), Err(libc::ENOENT));
        assert_eq!(map_entries_fd(fd, 4, 8, 100).unwrap().len(), 2);
        assert!(possible_cpus().unwrap() >= 1);
        let _pin = CpuPin::new(0).expect("CPU 0 exists");
    }

    #[test]
    fn program_type_can_be_chosen_before_load() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/xdp/build/reflector.v3.o");
        let mut obj = LibbpfObject::open_file(&path).expect("opens");
        let name = obj.programs()[0].name.clone();
        assert_eq!(
            obj.programs()[0].prog_type,
            bpfemu_isa::uapi::BPF_PROG_TYPE_XDP,
            "XDP from the section name"
        );
        use bpfemu_isa::uapi::BPF_PROG_TYPE_SCHED_CLS;
        obj.set_program_type(&name, BPF_PROG_TYPE_SCHED_CLS, 0)
            .unwrap();
        assert_eq!(obj.programs()[0].prog_type, BPF_PROG_TYPE_SCHED_CLS);
        assert!(obj.set_program_type("no_such_program", 6, 0).is_err());
        if !kernel_or_skip("program_type_can_be_chosen_before_load") {
            return;
        }
        // The XDP program reads `xdp_md.data` as a pointer; as a classifier that offset is
        // `__sk_buff.len`, a number, and the verifier refuses the packet access.
        let outcome = obj.load(&LogOptions::default());
        assert!(
            outcome.result.is_err(),
            "the kernel accepted an XDP program as a classifier"
        );
    }

    #[test]
    fn xdp_pass_round_trips_the_packet_through_test_run() {
        use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP};
        if !kernel_or_skip("xdp_pass_round_trips") {
            return;
        }
        const XDP_PASS: i32 = 2;
        let insns = [
            RawInsn::new(0xb7, 0, 0, 0, XDP_PASS), // r0 = XDP_PASS
            RawInsn::new(0x95, 0, 0, 0, 0),        // exit
        ];
        let mut opts = kernel::LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
        opts.log_level = 0;
        let fd = kernel::prog_load(&opts).fd.expect("xdp program");
        let packet: Vec<u8> = (0..64u8).collect();
        let out = test_run(std::os::fd::AsFd::as_fd(&fd), &packet, None, 1).expect("test run");
        assert_eq!(out.retval, XDP_PASS as u32);
        assert_eq!(out.data, packet);
        assert!(out.ctx.is_empty());
    }
}
