//! The running kernel, reached through the raw `bpf()` syscall.
//!
//! Everything bpfemu's own commands ask the kernel goes through here, with Rust alone (no C
//! library): load a program (with a verifier log at any level, grown when the kernel says it
//! did not fit), load BTF, create maps (with BTF, inner maps, names), read and write them by fd
//! (one element or in batches), freeze them, and run a program with `BPF_PROG_TEST_RUN`.
//! [`crate::object`] builds a whole loaded object on top of it.
//!
//! The `bpf_attr` union is modelled by one `#[repr(C)]` struct per command, laid out exactly as
//! `include/uapi/linux/bpf.h` lays out the fields we use; the kernel zero-checks everything past
//! the size we pass, so shorter structs stay valid on newer kernels.

use bpfemu_isa::RawInsn;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_BTF_LOAD: libc::c_long = 18;
const BPF_MAP_FREEZE: libc::c_long = 22;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The program and map types callers name most, from the one list (`bpfemu_isa::uapi`).
pub use bpfemu_isa::uapi::{
    BPF_MAP_TYPE_ARENA, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_HASH, BPF_PROG_TYPE_SOCKET_FILTER,
    BPF_PROG_TYPE_XDP,
};

/// `map_flags`: the map can be mmap()ed (required for arenas).
pub use bpfemu_isa::uapi::BPF_F_MMAPABLE;

/// Verifier log levels (`log_level` bits).
pub const BPF_LOG_LEVEL1: u32 = 1;
pub const BPF_LOG_LEVEL2: u32 = 2;
pub const BPF_LOG_STATS: u32 = 4;

/// The fields of `bpf_attr` read by BPF_PROG_LOAD, up to `fd_array_cnt`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    core_relo_cnt: u32,
    fd_array: u64,
    core_relos: u64,
    core_relo_rec_size: u32,
    log_true_size: u32,
    prog_token_fd: i32,
    fd_array_cnt: u32,
}

/// The fields of `bpf_attr` read by BPF_MAP_CREATE, up to `map_extra`.
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
    btf_fd: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
    btf_vmlinux_value_type_id: u32,
    map_extra: u64,
}

/// The fields of `bpf_attr` read by BPF_BTF_LOAD, up to `btf_log_true_size`.
#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    btf_log_true_size: u32,
}

/// The fields of `bpf_attr` read by BPF_MAP_LOOKUP_ELEM and BPF_MAP_UPDATE_ELEM.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The fields of `bpf_attr` read by BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
#[derive(Default)]
struct InfoByFdAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_map_info` (the kernel fills at most `info_len` bytes).
#[repr(C)]
#[derive(Default)]
struct MapInfoHead {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// One `bpf_func_info` record: the BTF FUNC type of the subprogram starting at `insn_off`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuncInfo {
    pub insn_off: u32,
    pub type_id: u32,
}

/// One `bpf_line_info` record: the source line of the instruction at `insn_off`, its file and
/// text as offsets into the program's BTF strings, the line number above a 10-bit column.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineInfo {
    pub insn_off: u32,
    pub file_name_off: u32,
    pub line_off: u32,
    pub line_col: u32,
}

// The uapi offsets of the last fields; a layout slip would silently send garbage.
const _: () = assert!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type) == 68);
const _: () = assert!(std::mem::offset_of!(ProgLoadAttr, fd_array) == 120);
const _: () = assert!(std::mem::offset_of!(ProgLoadAttr, fd_array_cnt) == 148);
const _: () = assert!(std::mem::offset_of!(MapCreateAttr, map_extra) == 64);
const _: () = assert!(std::mem::offset_of!(MapElemAttr, key) == 8);
const _: () = assert!(std::mem::offset_of!(MapElemAttr, flags) == 24);

/// Calls `bpf(cmd, attr, sizeof attr)`; the fd on success, the errno on failure.
fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> Result<OwnedFd, i32> {
    // SAFETY: `attr` is a live, exclusively borrowed #[repr(C)] bpf_attr prefix of the size we
    // pass; every pointer inside it points to memory that outlives this call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: both commands return a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// Calls `bpf(cmd, attr, sizeof attr)` for a command that returns 0 (not an fd); the errno on
/// failure.
fn sys_bpf_status<T>(cmd: libc::c_long, attr: &mut T) -> Result<(), i32> {
    // SAFETY: as in `sys_bpf`: a live #[repr(C)] bpf_attr prefix of the size we pass, whose
    // pointers outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    Ok(())
}

/// What to load.
#[derive(Clone, Debug)]
pub struct LoadOptions<'a> {
    pub prog_type: u32,
    pub insns: &'a [RawInsn],
    /// `expected_attach_type` (0 when the type needs none).
    pub expected_attach_type: u32,
    pub prog_flags: u32,
    /// `log_level` bits; 0 asks for no log.
    pub log_level: u32,
    /// Log buffer size in bytes (ignored when `log_level` is 0).
    pub log_size: usize,
    /// Map fds that `ld_imm64` with `src_reg` 5 and 6 index into.
    pub fd_array: &'a [RawFd],
    /// BTF describing the subprograms (needed, for example, by callbacks).
    pub prog_btf_fd: Option<RawFd>,
    pub func_info: &'a [FuncInfo],
    /// Source lines (sent with `prog_btf_fd`).
    pub line_info: &'a [LineInfo],
    /// The program's name as the kernel keeps it (see [`object_name`]).
    pub prog_name: [u8; 16],
    /// The license string; GPL-only helpers need a GPL-compatible one.
    pub license: &'a std::ffi::CStr,
    /// `kern_version` (only kprobes of old kernels read it).
    pub kern_version: u32,
}

impl<'a> LoadOptions<'a> {
    /// A load of `insns` as `prog_type` with a level-2 verifier log of 16 MiB.
    pub fn new(prog_type: u32, insns: &'a [RawInsn]) -> Self {
        LoadOptions {
            prog_type,
            insns,
            expected_attach_type: 0,
            prog_flags: 0,
            log_level: BPF_LOG_LEVEL2,
            log_size: 16 << 20,
            fd_array: &[],
            prog_btf_fd: None,
            func_info: &[],
            line_info: &[],
            prog_name: [0; 16],
            license: c"GPL",
            kern_version: 0,
        }
    }
}

/// The kernel's answer to BPF_PROG_LOAD.
#[derive(Debug)]
pub struct LoadResult {
    /// The program fd when the verifier accepted it, else the errno.
    pub fd: Result<OwnedFd, i32>,
    /// The verifier log (empty without a log level).
    pub log: String,
}

/// The last meaningful line of a verifier log: the error, not the statistics after it. A few
/// messages are logged without a newline (`check_btf_func_early`'s), and the statistics'
/// first line is then glued to them: it is cut off.
pub fn verifier_error_line(log: &str) -> String {
    log.lines()
        .rev()
        .map(|l| match l.find("verification time ") {
            Some(glued) if glued > 0 => l[..glued].trim(),
            _ => l.trim(),
        })
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                // 7.x closes the log with a line of its own statistics.
                && !l.starts_with("insns processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
                && !l.starts_with("-- END PROG LOAD LOG --")
                // The states printed after "infinite loop detected at insn N".
                && !l.starts_with("cur state:")
                && !l.starts_with("old state:")
        })
        .map_or_else(|| "(empty verifier log)".to_owned(), str::to_owned)
}

/// The largest log the kernel takes (`log_size` must stay below `UINT_MAX >> 2`).
const LOG_SIZE_MAX: usize = (u32::MAX >> 2) as usize - 1;

/// Loads a program. When the verifier log does not fit the buffer (ENOSPC: the kernel then
/// refuses even a program it accepted), the load is repeated once with a buffer of the size
/// the kernel reported (`log_true_size`), so the verdict never depends on the buffer.
pub fn prog_load(opts: &LoadOptions<'_>) -> LoadResult {
    let first = prog_load_once(opts, opts.log_size);
    match first {
        (
            LoadResult {
                fd: Err(libc::ENOSPC),
                ..
            },
            true_size,
        ) if opts.log_level != 0 && true_size > opts.log_size => {
            prog_load_once(opts, true_size.min(LOG_SIZE_MAX)).0
        }
        (result, _) => result,
    }
}

/// One BPF_PROG_LOAD with a log of `log_size` bytes; the result and the kernel's
/// `log_true_size` (the bytes the whole log needs, its NUL included).
fn prog_load_once(opts: &LoadOptions<'_>, log_size: usize) -> (LoadResult, usize) {
    let license = opts.license;
    // `RawInsn` is not the uapi struct (it splits the register byte), so lay the slots out in
    // the kernel's 8-byte format first.
    let slots: Vec<u64> = opts.insns.iter().map(|i| i.to_u64()).collect();
    let mut log = vec![0u8; if opts.log_level == 0 { 0 } else { log_size }];
    let mut attr = ProgLoadAttr {
        prog_type: opts.prog_type,
        insn_cnt: opts.insns.len() as u32,
        insns: slots.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: opts.log_level,
        log_size: log.len() as u32,
        log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        prog_flags: opts.prog_flags,
        prog_name: opts.prog_name,
        kern_version: opts.kern_version,
        expected_attach_type: opts.expected_attach_type,
        prog_btf_fd: opts.prog_btf_fd.unwrap_or(0) as u32,
        func_info_rec_size: if opts.func_info.is_empty() {
            0
        } else {
            std::mem::size_of::<FuncInfo>() as u32
        },
        func_info: opts.func_info.as_ptr() as u64,
        func_info_cnt: opts.func_info.len() as u32,
        line_info_rec_size: if opts.line_info.is_empty() {
            0
        } else {
            std::mem::size_of::<LineInfo>() as u32
        },
        line_info: opts.line_info.as_ptr() as u64,
        line_info_cnt: opts.line_info.len() as u32,
        fd_array: if opts.fd_array.is_empty() {
            0
        } else {
            opts.fd_array.as_ptr() as u64
        },
        ..Default::default()
    };
    let fd = sys_bpf(BPF_PROG_LOAD, &mut attr);
    let true_size = attr.log_true_size as usize;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    log.truncate(end);
    (
        LoadResult {
            fd,
            log: String::from_utf8_lossy(&log).into_owned(),
        },
        true_size,
    )
}

/// Loads a raw BTF blob; its fd, or the errno and the kernel's BTF log.
///
/// As libbpf does, the first load asks for no log: at level 1 the kernel logs every type, and
/// a log that overflows its buffer fails the load with ENOSPC, so the verdict would depend on
/// the buffer. Only a refused blob is loaded again, with a log, to say why.
pub fn btf_load(btf: &[u8]) -> Result<OwnedFd, (i32, String)> {
    let errno = match btf_load_once(btf, &mut []) {
        Ok(fd) => return Ok(fd),
        Err(errno) => errno,
    };
    let mut log = vec![0u8; 16 << 20];
    // The first answer stands whatever this one is (an fd here is dropped at once).
    let _ = btf_load_once(btf, &mut log);
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Err((errno, String::from_utf8_lossy(&log[..end]).into_owned()))
}

/// The BTF kinds and forms this kernel accepts, probed once per process as libbpf probes
/// them: one tiny blob per feature, loaded without a log.
pub fn btf_features() -> bpfemu_loader::btf::BtfFeatures {
    use bpfemu_loader::btf::BtfFeatures;
    static FEATURES: std::sync::OnceLock<BtfFeatures> = std::sync::OnceLock::new();
    *FEATURES.get_or_init(|| {
        let mut features = BtfFeatures::ALL;
        for probe in BtfFeatures::probes() {
            probe.record(
                &mut features,
                btf_accepted(&probe.btf.to_kernel_bytes().bytes),
            );
        }
        features
    })
}

/// Whether BPF_BTF_LOAD takes `btf` (loaded without a log, the fd closed at once).
pub fn btf_accepted(btf: &[u8]) -> bool {
    btf_load_once(btf, &mut []).is_ok()
}

/// One BPF_BTF_LOAD, logging at level 1 into `log` unless it is empty.
fn btf_load_once(btf: &[u8], log: &mut [u8]) -> Result<OwnedFd, i32> {
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size: btf.len() as u32,
        btf_log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        btf_log_size: log.len() as u32,
        btf_log_level: u32::from(!log.is_empty()),
        ..Default::default()
    };
    sys_bpf(BPF_BTF_LOAD, &mut attr)
}

/// A map to create.
#[derive(Clone, Copy, Debug, Default)]
pub struct MapSpec {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    /// Type-specific: an arena's user-space start address, for example.
    pub map_extra: u64,
    /// The NUMA node (read by the kernel only with `BPF_F_NUMA_NODE` in the flags).
    pub numa_node: u32,
    /// The inner map template of a map-in-map.
    pub inner_map_fd: Option<RawFd>,
    /// BTF describing the key and value: the BTF fd and the key and value type ids (special
    /// fields such as spin locks and timers are found through it).
    pub btf: Option<MapBtf>,
    /// The map's name, NUL-padded (15 bytes at most are kept).
    pub name: [u8; 16],
}

/// A map's BTF: `btf_fd`, `btf_key_type_id`, `btf_value_type_id`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MapBtf {
    pub fd: RawFd,
    pub key_type_id: u32,
    pub value_type_id: u32,
}

/// `name` cut to the 15 characters the kernel keeps, keeping only the characters it accepts
/// (alphanumerics, `_` and `.`), NUL-padded.
pub fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (slot, b) in out
        .iter_mut()
        .zip(
            name.bytes()
                .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.'),
        )
        .take(15)
    {
        *slot = b;
    }
    out
}

impl MapSpec {
    pub fn array(value_size: u32, max_entries: u32) -> Self {
        MapSpec {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size,
            max_entries,
            ..Default::default()
        }
    }

    pub fn hash(key_size: u32, value_size: u32, max_entries: u32) -> Self {
        MapSpec {
            map_type: BPF_MAP_TYPE_HASH,
            key_size,
            value_size,
            max_entries,
            ..Default::default()
        }
    }
}

/// Creates a map; its fd or the errno.
pub fn map_create(spec: &MapSpec) -> Result<OwnedFd, i32> {
    let btf = spec.btf.unwrap_or_default();
    let mut attr = MapCreateAttr {
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        map_flags: spec.map_flags,
        map_extra: spec.map_extra,
        numa_node: spec.numa_node,
        inner_map_fd: spec.inner_map_fd.unwrap_or(0) as u32,
        map_name: spec.name,
        btf_fd: btf.fd as u32,
        btf_key_type_id: btf.key_type_id,
        btf_value_type_id: btf.value_type_id,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_CREATE, &mut attr)
}

/// EINVAL unless the map's key and value sizes are `key_len` and `value_len`: the kernel reads
/// and writes exactly its own sizes through the pointers we pass.
fn check_elem_sizes(map: &OwnedFd, key_len: usize, value_len: usize) -> Result<(), i32> {
    let mut info = MapInfoHead::default();
    let mut attr = InfoByFdAttr {
        bpf_fd: map.as_raw_fd() as u32,
        info_len: std::mem::size_of::<MapInfoHead>() as u32,
        info: &mut info as *mut MapInfoHead as u64,
    };
    sys_bpf_status(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    // Per-CPU maps copy one value per possible CPU: more than `value_size` bytes.
    let per_cpu = is_per_cpu_map(info.map_type);
    if per_cpu || info.key_size as usize != key_len || info.value_size as usize != value_len {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Reads the value stored under `key` into `value` (BPF_MAP_LOOKUP_ELEM); EINVAL unless the
/// slices have the map's key and value sizes, or the map is per-CPU (one value per CPU).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> Result<(), i32> {
    check_elem_sizes(map, key.len(), value.len())?;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    };
    sys_bpf_status(BPF_MAP_LOOKUP_ELEM, &mut attr)
}

/// Stores `value` under `key` (BPF_MAP_UPDATE_ELEM with `flags`, e.g. 0 for BPF_ANY); EINVAL
/// unless the slices have the map's key and value sizes.
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8], flags: u64) -> Result<(), i32> {
    check_elem_sizes(map, key.len(), value.len())?;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags,
    };
    sys_bpf_status(BPF_MAP_UPDATE_ELEM, &mut attr)
}

/// The head of `struct bpf_prog_info` up to `xlated_prog_insns`.
#[repr(C)]
#[derive(Default)]
struct ProgInfoHead {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
}

/// The program the kernel runs after its verifier's rewrites (`xlated_prog_insns`, what
/// `bpftool prog dump xlated` prints): map references show the map's id, helper calls an
/// address offset.
pub fn prog_xlated(prog: BorrowedFd<'_>) -> Result<Vec<RawInsn>, i32> {
    let mut info = ProgInfoHead::default();
    let mut attr = InfoByFdAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    sys_bpf_status(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let mut bytes = vec![0u8; info.xlated_prog_len as usize];
    let mut info = ProgInfoHead {
        xlated_prog_len: bytes.len() as u32,
        xlated_prog_insns: bytes.as_mut_ptr() as u64,
        ..ProgInfoHead::default()
    };
    let mut attr = InfoByFdAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    sys_bpf_status(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(RawInsn::parse_all(&bytes).unwrap_or_default())
}

/// A map fd as the 32-bit immediate of an `ld_imm64`.
pub fn fd_imm(fd: &OwnedFd) -> i32 {
    fd.as_raw_fd()
}

/// Whether the kernel accepts a trivial socket filter (`r0 = 0; exit`) from this process.
pub fn kernel_available() -> bool {
    let insns = [
        RawInsn::new(0xb7, 0, 0, 0, 0), // r0 = 0
        RawInsn::new(0x95, 0, 0, 0, 0), // exit
    ];
    let mut opts = LoadOptions::new(BPF_PROG_TYPE_SOCKET_FILTER, &insns);
    opts.log_level = 0;
    prog_load(&opts).fd.is_ok()
}

// ---------------------------------------------------------------------------------------------
// Maps by fd

/// The fields of `bpf_attr` read by BPF_MAP_*_BATCH.
#[repr(C)]
#[derive(Default)]
struct MapBatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// The fields of `bpf_attr` read by BPF_MAP_FREEZE.
#[repr(C)]
#[derive(Default)]
struct MapFdAttr {
    map_fd: u32,
}

/// The fields of `bpf_attr` read by BPF_PROG_TEST_RUN, up to `batch_size`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit, so that it is zero: the kernel refuses non-zero bytes past `batch_size`, and
    /// Rust leaves implicit padding undefined.
    _pad: u32,
}

const _: () = assert!(std::mem::offset_of!(MapBatchAttr, elem_flags) == 40);
const _: () = assert!(std::mem::offset_of!(TestRunAttr, ctx_out) == 56);
const _: () = assert!(std::mem::offset_of!(TestRunAttr, batch_size) == 72);
const _: () = assert!(std::mem::size_of::<TestRunAttr>() == 80);

fn elem_status(
    cmd: libc::c_long,
    map: BorrowedFd<'_>,
    key: *const u8,
    value: u64,
    flags: u64,
) -> Result<(), i32> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as u64,
        value,
        flags,
    };
    sys_bpf_status(cmd, &mut attr)
}

/// `BPF_MAP_UPDATE_ELEM` on a map fd; `value` must have the syscall-side size
/// ([`sys_value_size`]) and `key` the map's key size.
pub fn map_update_fd(map: BorrowedFd<'_>, key: &[u8], value: &[u8], flags: u64) -> Result<(), i32> {
    elem_status(
        BPF_MAP_UPDATE_ELEM,
        map,
        key.as_ptr(),
        value.as_ptr() as u64,
        flags,
    )
}

/// `BPF_MAP_LOOKUP_ELEM` into a buffer of `value_len` bytes (the syscall-side size).
pub fn map_lookup_fd(map: BorrowedFd<'_>, key: &[u8], value_len: usize) -> Result<Vec<u8>, i32> {
    let mut out = vec![0u8; value_len];
    elem_status(
        BPF_MAP_LOOKUP_ELEM,
        map,
        key.as_ptr(),
        out.as_mut_ptr() as u64,
        0,
    )?;
    Ok(out)
}

/// `BPF_MAP_DELETE_ELEM`.
pub fn map_delete_fd(map: BorrowedFd<'_>, key: &[u8]) -> Result<(), i32> {
    elem_status(BPF_MAP_DELETE_ELEM, map, key.as_ptr(), 0, 0)
}

/// `BPF_MAP_GET_NEXT_KEY`: the first key for `None`; ENOENT after the last.
pub fn map_next_key_fd(
    map: BorrowedFd<'_>,
    key: Option<&[u8]>,
    key_len: usize,
) -> Result<Vec<u8>, i32> {
    let mut out = vec![0u8; key_len];
    let k = key.map_or(std::ptr::null(), <[u8]>::as_ptr);
    // The "value" slot of the attr holds `next_key` for this command.
    elem_status(BPF_MAP_GET_NEXT_KEY, map, k, out.as_mut_ptr() as u64, 0)?;
    Ok(out)
}

/// `BPF_MAP_FREEZE`: no more writes from user space (the verifier then treats a read-only
/// map's contents as constants).
pub fn map_freeze(map: BorrowedFd<'_>) -> Result<(), i32> {
    let mut attr = MapFdAttr {
        map_fd: map.as_raw_fd() as u32,
    };
    sys_bpf_status(BPF_MAP_FREEZE, &mut attr)
}

/// A map entry as raw bytes: the key and the syscall-side value.
pub type MapEntryBytes = (Vec<u8>, Vec<u8>);

/// Every (key, syscall-side value) pair in `get_next_key` order, as `bpftool map dump` lists
/// them; a key deleted between the two calls is left out. At most `limit` entries.
pub fn map_entries_fd(
    map: BorrowedFd<'_>,
    key_len: usize,
    value_len: usize,
    limit: usize,
) -> Result<Vec<MapEntryBytes>, i32> {
    let mut out = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    loop {
        let next = match map_next_key_fd(map, key.as_deref(), key_len) {
            Ok(k) => k,
            Err(libc::ENOENT) => return Ok(out),
            Err(e) => return Err(e),
        };
        match map_lookup_fd(map, &next, value_len) {
            Ok(v) => out.push((next.clone(), v)),
            Err(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
        if out.len() >= limit {
            return Ok(out);
        }
        key = Some(next);
    }
}

/// Reads a map in batches of up to `chunk` entries (`BPF_MAP_LOOKUP_BATCH`: one syscall per
/// batch instead of two per entry), handing each batch to `each` as parallel key and value
/// buffers (`n` entries of `key_len` and `value_len` bytes). ENOTSUPP/EINVAL from the first
/// call mean the map type has no batch operations: the caller falls back to
/// [`map_entries_fd`].
pub fn map_lookup_batches(
    map: BorrowedFd<'_>,
    key_len: usize,
    value_len: usize,
    chunk: usize,
    mut each: impl FnMut(usize, &[u8], &[u8]),
) -> Result<(), i32> {
    let chunk = chunk.max(1);
    let mut keys = vec![0u8; key_len * chunk];
    let mut values = vec![0u8; value_len * chunk];
    // The position token: a key for arrays, a bucket number for hash maps.
    let token_len = key_len.max(8);
    let mut in_batch = vec![0u8; token_len];
    let mut out_batch = vec![0u8; token_len];
    let mut first = true;
    loop {
        let mut attr = MapBatchAttr {
            in_batch: if first { 0 } else { in_batch.as_ptr() as u64 },
            out_batch: out_batch.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: map.as_raw_fd() as u32,
            ..Default::default()
        };
        let r = sys_bpf_status(BPF_MAP_LOOKUP_BATCH, &mut attr);
        let n = attr.count as usize;
        match r {
            Ok(()) | Err(libc::ENOENT) if n > 0 => {
                each(n, &keys[..n * key_len], &values[..n * value_len]);
            }
            Ok(()) | Err(libc::ENOENT) => {}
            // A hash bucket with more entries than the batch holds: a bigger batch.
            Err(libc::ENOSPC) if chunk < 1 << 24 => {
                return map_lookup_batches(map, key_len, value_len, chunk * 4, each);
            }
            Err(e) => return Err(e),
        }
        if r.is_err() {
            return Ok(());
        }
        std::mem::swap(&mut in_batch, &mut out_batch);
        first = false;
    }
}

// ---------------------------------------------------------------------------------------------
// Per-CPU layout

/// The kernel's `num_possible_cpus()`, from `/sys/devices/system/cpu/possible` (as libbpf
/// reads it): how many copies a per-CPU map value has on the syscall side.
pub fn possible_cpus() -> Result<u32, i32> {
    static CACHED: std::sync::OnceLock<Result<u32, i32>> = std::sync::OnceLock::new();
    *CACHED.get_or_init(|| {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        parse_cpu_list(text.trim()).ok_or(libc::EINVAL)
    })
}

/// Counts the CPUs of a list like `0-3,5,7-8` (the highest index plus one, as the kernel's
/// possible mask is dense from 0).
fn parse_cpu_list(list: &str) -> Option<u32> {
    let mut highest = None;
    for part in list.split(',') {
        let last = part.rsplit('-').next()?;
        let n: u32 = last.trim().parse().ok()?;
        highest = Some(highest.map_or(n, |h: u32| h.max(n)));
    }
    highest.map(|h| h + 1)
}

/// The map types whose syscall-side values hold one copy per possible CPU.
pub fn is_per_cpu_map(map_type: u32) -> bool {
    use bpfemu_isa::uapi::*;
    matches!(
        map_type,
        BPF_MAP_TYPE_PERCPU_HASH
            | BPF_MAP_TYPE_PERCPU_ARRAY
            | BPF_MAP_TYPE_LRU_PERCPU_HASH
            | BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE
    )
}

/// Bytes of a value on the syscall side: `value_size`, or for per-CPU maps one copy per
/// possible CPU, each padded to 8 bytes (`round_up(value_size, 8) * num_possible_cpus`).
pub fn sys_value_size(map_type: u32, value_size: u32, cpus: u32) -> usize {
    if is_per_cpu_map(map_type) {
        (value_size as usize).div_ceil(8) * 8 * cpus as usize
    } else {
        value_size as usize
    }
}

// ---------------------------------------------------------------------------------------------
// BPF_PROG_TEST_RUN

/// What one `BPF_PROG_TEST_RUN` returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRunOutput {
    /// The program's return value (an XDP action for XDP).
    pub retval: u32,
    /// The packet after the run (it may have grown or shrunk).
    pub data: Vec<u8>,
    /// The context after the run (empty when none was passed).
    pub ctx: Vec<u8>,
    /// Average nanoseconds per run, as the kernel measured it.
    pub duration_ns: u32,
}

impl TestRunOutput {
    /// The `xdp_md` the kernel wrote back (`None` when no ctx was passed).
    pub fn xdp_md(&self) -> Option<XdpMd> {
        XdpMd::from_bytes(&self.ctx)
    }
}

/// The XDP context test_run takes (`ctx_in`), typed: see [`XdpMd`] for its fields' meaning
/// there (`data` is the metadata length at the front of `data_in`).
pub use bpfemu_vm::xdp::runtime::XdpMd;

/// [`test_run`] for XDP with a typed `ctx_in` (`None`: no ctx, test_run's defaults: the
/// loopback's queue 0 and no metadata). The ctx written back is in
/// [`TestRunOutput::xdp_md`].
pub fn test_run_xdp(
    prog: BorrowedFd<'_>,
    data_in: &[u8],
    md: Option<&XdpMd>,
    repeat: u32,
) -> Result<TestRunOutput, i32> {
    let bytes = md.map(XdpMd::to_bytes);
    test_run(prog, data_in, bytes.as_ref().map(|b| &b[..]), repeat)
}

/// Room for a packet to grow during the run (XDP: headroom can move into data, tails extend).
const TEST_RUN_GROWTH: usize = 4096;

/// Runs a loaded program `repeat` times over `data_in` (and `ctx_in`, e.g. an `xdp_md`)
/// through `BPF_PROG_TEST_RUN`; the errno on failure. XDP needs at least 14 bytes.
pub fn test_run(
    prog: BorrowedFd<'_>,
    data_in: &[u8],
    ctx_in: Option<&[u8]>,
    repeat: u32,
) -> Result<TestRunOutput, i32> {
    let mut data_out = vec![0u8; data_in.len() + TEST_RUN_GROWTH];
    let mut ctx_out = vec![0u8; ctx_in.map_or(0, <[u8]>::len)];
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_in: data_in.as_ptr() as u64,
        data_size_in: data_in.len() as u32,
        data_out: data_out.as_mut_ptr() as u64,
        data_size_out: data_out.len() as u32,
        repeat,
        ..Default::default()
    };
    if let Some(ctx) = ctx_in {
        attr.ctx_in = ctx.as_ptr() as u64;
        attr.ctx_size_in = ctx.len() as u32;
        attr.ctx_out = ctx_out.as_mut_ptr() as u64;
        attr.ctx_size_out = ctx_out.len() as u32;
    }
    sys_bpf_status(BPF_PROG_TEST_RUN, &mut attr)?;
    data_out.truncate(attr.data_size_out as usize);
    ctx_out.truncate(attr.ctx_size_out as usize);
    Ok(TestRunOutput {
        retval: attr.retval,
        data: data_out,
        ctx: ctx_out,
        duration_ns: attr.duration,
    })
}

// ---------------------------------------------------------------------------------------------
// Clocks and CPU pinning

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_BOOTTIME` in nanoseconds: the clock `bpf_ktime_get_boot_ns` reads.
pub fn boottime_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// CPU time of the calling thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`: exact, where
/// `/proc/thread-self/schedstat` is only brought up to date at scheduler ticks).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call writes into.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// The calling thread pinned to one CPU; the previous affinity comes back on drop. Per-CPU
/// map state written by BPF_PROG_TEST_RUN is then that CPU's copy.
pub struct CpuPin {
    previous: Option<libc::cpu_set_t>,
}

impl CpuPin {
    /// Pins the calling thread to `cpu` (sched_setaffinity).
    pub fn new(cpu: usize) -> std::io::Result<CpuPin> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // size_of::<cpu_set_t>() bytes into it.
        let mut previous: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; pid 0 is the calling thread.
        let got = unsafe {
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut previous)
        };
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU_SET writes one bit of the local set; it panics on a CPU beyond the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(CpuPin {
            previous: (got == 0).then_some(previous),
        })
    }
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            // SAFETY: `previous` is the set sched_getaffinity returned for this thread.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), previous) };
        }
    }
}

/// The CPU the calling thread runs on now (sched_getcpu), `None` where the call fails.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Whether a kernel test can run: true when bpf() works here. Otherwise it prints a skip
/// message and returns false, or panics when `BPFEMU_REQUIRE_KERNEL=1` (CI), where skipping
/// would hide a broken oracle.
pub fn kernel_or_skip(test: &str) -> bool {
    if kernel_available() {
        return true;
    }
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: BPFEMU_REQUIRE_KERNEL=1 but bpf() is not usable here (not root, or no bpf syscall)"
    );
    eprintln!(
        "{test}: skipping: the kernel's bpf() is not usable here (set BPFEMU_REQUIRE_KERNEL=1 to fail)"
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn error_line_skips_statistics() {
        let log = "0: R1=ctx() R10=fp0\n0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n";
        assert_eq!(verifier_error_line(log), "R0 !read_ok");
        assert_eq!(verifier_error_line(""), "(empty verifier log)");
    }

    #[test]
    fn cpu_lists_count_up_to_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3"), Some(4));
        assert_eq!(parse_cpu_list("0-3,5,7-8"), Some(9));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn batches_read_every_entry_of_arrays_and_hashes() {
        if !kernel_or_skip("batches_read_every_entry") {
            return;
        }
        for spec in [MapSpec::array(8, 1000), MapSpec::hash(4, 8, 5000)] {
            let map = map_create(&spec).expect("map");
            let fd = map.as_fd();
            for k in 0u32..1000 {
                map_update_fd(fd, &k.to_ne_bytes(), &u64::from(k * 3).to_ne_bytes(), 0).unwrap();
            }
            let mut seen = std::collections::BTreeMap::new();
            map_lookup_batches(fd, 4, 8, 64, |n, keys, values| {
                for i in 0..n {
                    let k = u32::from_ne_bytes(keys[i * 4..i * 4 + 4].try_into().unwrap());
                    let v = u64::from_ne_bytes(values[i * 8..i * 8 + 8].try_into().unwrap());
                    seen.insert(k, v);
                }
            })
            .unwrap();
            assert_eq!(seen.len(), 1000, "map type {}", spec.map_type);
            assert!(seen.iter().all(|(k, v)| u64::from(*k) * 3 == *v));
        }
    }

    #[test]
    fn a_log_that_does_not_fit_is_grown_not_a_rejection() {
        if !kernel_or_skip("a_log_that_does_not_fit") {
            return;
        }
        let mut insns = vec![RawInsn::new(0xb7, 0, 0, 0, 0)];
        for _ in 0..200 {
            insns.push(RawInsn::new(0x07, 0, 0, 0, 1)); // r0 += 1
        }
        insns.push(RawInsn::new(0x95, 0, 0, 0, 0));
        let mut opts = LoadOptions::new(BPF_PROG_TYPE_XDP, &insns);
        opts.log_size = 256;
        let result = prog_load(&opts);
        assert!(result.fd.is_ok(), "rejected: {:?}", result.fd.err());
        assert!(result.log.contains("processed 202 insns"), "{}", result.log);
    }
}
