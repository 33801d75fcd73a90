//! The running kernel, reached through the raw `bpf()` syscall.
//!
//! This is the smallest oracle that can ask the kernel's verifier about a program: load a
//! program (with a verifier log at any level) and create the maps its `ld_imm64` instructions
//! refer to. Later work grows it into the full oracle over libbpf-sys (ELF objects,
//! BPF_PROG_TEST_RUN, map read-back); until then it stays small on purpose.
//!
//! The `bpf_attr` union is modelled by one `#[repr(C)]` struct per command, laid out exactly as
//! `include/uapi/linux/bpf.h` lays out the fields we use; the kernel zero-checks everything past
//! the size we pass, so shorter structs stay valid on newer kernels.

use bpfemu_isa::RawInsn;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_BTF_LOAD: libc::c_long = 18;

/// Program types (`enum bpf_prog_type`) that the tests use.
pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
pub const BPF_PROG_TYPE_XDP: u32 = 6;

/// Map types (`enum bpf_map_type`) that the tests use.
pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_ARENA: u32 = 33;

/// `map_flags`: the map can be mmap()ed (required for arenas).
pub const BPF_F_MMAPABLE: u32 = 1 << 10;

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

/// Loads a program under the "GPL" license.
pub fn prog_load(opts: &LoadOptions<'_>) -> LoadResult {
    let license = c"GPL";
    // `RawInsn` is not the uapi struct (it splits the register byte), so lay the slots out in
    // the kernel's 8-byte format first.
    let slots: Vec<u64> = opts.insns.iter().map(|i| i.to_u64()).collect();
    let mut log = vec![
        0u8;
        if opts.log_level == 0 {
            0
        } else {
            opts.log_size
        }
    ];
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
        expected_attach_type: opts.expected_attach_type,
        prog_btf_fd: opts.prog_btf_fd.unwrap_or(0) as u32,
        func_info_rec_size: if opts.func_info.is_empty() {
            0
        } else {
            std::mem::size_of::<FuncInfo>() as u32
        },
        func_info: opts.func_info.as_ptr() as u64,
        func_info_cnt: opts.func_info.len() as u32,
        fd_array: if opts.fd_array.is_empty() {
            0
        } else {
            opts.fd_array.as_ptr() as u64
        },
        ..Default::default()
    };
    let fd = sys_bpf(BPF_PROG_LOAD, &mut attr);
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    log.truncate(end);
    LoadResult {
        fd,
        log: String::from_utf8_lossy(&log).into_owned(),
    }
}

/// Loads a raw BTF blob; its fd, or the errno and the kernel's BTF log.
pub fn btf_load(btf: &[u8]) -> Result<OwnedFd, (i32, String)> {
    let mut log = vec![0u8; 64 << 10];
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size: btf.len() as u32,
        btf_log_buf: log.as_mut_ptr() as u64,
        btf_log_size: log.len() as u32,
        btf_log_level: 1,
        ..Default::default()
    };
    sys_bpf(BPF_BTF_LOAD, &mut attr).map_err(|errno| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        (errno, String::from_utf8_lossy(&log[..end]).into_owned())
    })
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
    let mut attr = MapCreateAttr {
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        map_flags: spec.map_flags,
        map_extra: spec.map_extra,
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
    // Per-CPU maps (PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH, PERCPU_CGROUP_STORAGE) copy
    // one value per possible CPU: more than `value_size` bytes.
    let per_cpu = matches!(info.map_type, 5 | 6 | 10 | 21);
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
