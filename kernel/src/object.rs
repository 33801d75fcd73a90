//! One program of a loaded [`Object`] in the running kernel, through the raw bpf() layer
//! (the [crate root](crate)): what `bpfemu diff` compares bpfemu with.
//!
//! [`KernelObject::load`] does for one program what libbpf does for a whole object, and only
//! what that program needs, so that another program of the object the kernel rejects (a tracing
//! program next to the XDP one) cannot block it:
//! 1. the object's BTF, as the loader fixed it up, is loaded (maps with spin locks, timers or
//!    local storage need it, so do global functions and callbacks); when the kernel refuses
//!    it, everything goes on without BTF, as libbpf does;
//! 2. the maps the program refers to are created, with the maps and programs their initial
//!    slots name (prog arrays, map-in-maps) and those programs' maps in turn; a map the kernel
//!    refuses with BTF is created again without it;
//! 3. global data gets its initial contents, with the caller's overrides
//!    ([`KernelObject::load`]'s `initial`: a `--maps` document's `.rodata` values, which can
//!    only go in now), and read-only sections are frozen before any program load, so the
//!    verifier sees them as constants as it does under libbpf;
//! 4. each program's map references become map fds and it is loaded with the program type,
//!    expected attach type and flags bpfemu's loader resolved (so pre-1.0 section names load),
//!    its func_info, license and kernel version; the initial slots are filled last.
//!
//! Loading a program a slot names can fail (the kernel rejects it): the slot stays empty and
//! [`KernelObject::warnings`] says so; only the selected program's rejection is an error.

use crate::{self as kernel, FuncInfo, MapBtf};
use bpfemu_isa::RawInsn;
use bpfemu_loader::{MapOrigin, MapSpec, Object, ProgramSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use bpfemu_isa::uapi::{BPF_F_RDONLY_PROG, BPF_MAP_TYPE_PROG_ARRAY as PROG_ARRAY};

/// `ld_imm64` src_reg values that carry a map fd.
const PSEUDO_MAP_FD: u8 = 1;
const PSEUDO_MAP_VALUE: u8 = 2;
const LD_IMM64: u8 = 0x18;

/// Why the kernel side could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KernelObjectError {
    #[error("no program named `{0}` in the object")]
    NoProgram(String),
    #[error("map {map}: the kernel refuses to create it ({}){hint}", bpfemu_isa::uapi::Errno(*errno))]
    MapCreate {
        map: String,
        /// The errno `BPF_MAP_CREATE` failed with.
        errno: i32,
        hint: String,
    },
    #[error("map {map}: the kernel refuses its initial contents ({errno})")]
    MapInit { map: String, errno: String },
    #[error("map {map}: failed to mmap arena ({})", bpfemu_isa::uapi::Errno(*errno))]
    ArenaMap { map: String, errno: i32 },
    #[error(
        "program {program}: instruction {pc} refers to map #{index}, which the object does not have"
    )]
    BadMapRef {
        program: String,
        pc: usize,
        index: i32,
    },
    #[error("program {program}: the kernel rejects it ({}):\n{tail}", bpfemu_isa::uapi::Errno(*errno).to_string())]
    ProgLoad {
        program: String,
        errno: i32,
        /// The end of the verifier log.
        tail: String,
        log: String,
    },
}

/// Initial contents to write before any program is loaded: map name -> (key, value) pairs.
pub type InitialEntries = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

/// How to load.
#[derive(Clone, Debug, Default)]
pub struct KernelLoadOptions {
    /// Verifier log level for the selected program (0: none).
    pub log_level: u32,
    /// Verifier log size in bytes (grown when the kernel says the log did not fit).
    pub log_size: usize,
    /// Entries written before the programs load (global data overrides).
    pub initial: InitialEntries,
}

/// The selected program and what it needs, alive in the kernel while this value lives.
pub struct KernelObject {
    /// Map fds by index into [`Object::maps`] (`None`: not needed by the program).
    maps: Vec<Option<OwnedFd>>,
    /// Which maps are arrays created mmap()able.
    mmapable: Vec<bool>,
    /// Each map's `max_entries` and 8-byte-rounded value size (an array's element stride).
    array_sizes: Vec<(usize, usize)>,
    /// Program fds by index into [`Object::programs`].
    programs: Vec<Option<OwnedFd>>,
    map_names: Vec<String>,
    program_names: Vec<String>,
    /// The selected program's verifier log.
    log: String,
    warnings: Vec<String>,
    /// The arenas, mapped as libbpf maps them (see [`MappedArena`]).
    _arenas: Vec<MappedArena>,
    _btf: Option<OwnedFd>,
}

impl KernelObject {
    /// Loads `program` of `obj` and what it needs (see the module docs).
    pub fn load(
        obj: &Object,
        program: &str,
        opts: &KernelLoadOptions,
    ) -> Result<KernelObject, KernelObjectError> {
        let selected = obj
            .programs
            .iter()
            .position(|p| p.name == program)
            .ok_or_else(|| KernelObjectError::NoProgram(program.to_owned()))?;
        let (needed_maps, needed_progs) = closure(obj, selected);
        let mut warnings = Vec::new();
        let btf = obj.btf.as_ref().and_then(|b| {
            // A refusal in bytes the parsed model does not keep (a DATASEC's kind flag):
            // libbpf sends them as they are and the kernel refuses the blob, so libbpf goes
            // on without BTF. Re-encoded, they would be gone and the kernel would accept.
            if let Some(why) = &b.raw_refusal {
                warnings.push(format!(
                    "the kernel refuses the object's BTF as libbpf sends it (type {why}); loading without it"
                ));
                return None;
            }
            // What libbpf loads into a kernel older than the BTF: its stand-ins for the kinds
            // that kernel lacks.
            let sanitized = b.sanitized_for(kernel::btf_features());
            kernel::btf_load(&sanitized.as_ref().unwrap_or(b).to_kernel_bytes().bytes)
                .map_err(|(errno, log)| {
                    let last = log.lines().last().unwrap_or_default().to_owned();
                    warnings.push(format!(
                        "the kernel refuses the object's BTF ({}: {last}); loading without it",
                        bpfemu_isa::uapi::Errno(errno)
                    ));
                })
                .ok()
        });
        let btf_fd = btf.as_ref().map(|b| b.as_raw_fd());
        let mut maps: Vec<Option<OwnedFd>> = (0..obj.maps.len()).map(|_| None).collect();
        let mut mmapable = vec![false; obj.maps.len()];
        let mut arenas = Vec::new();
        for &i in &needed_maps {
            let (fd, can_map) = create_map(&obj.maps[i], btf_fd)?;
            mmapable[i] = can_map;
            set_initial(
                &obj.maps[i],
                fd.as_fd(),
                opts.initial.get(&obj.maps[i].name),
            )?;
            if obj.maps[i].map_type == kernel::BPF_MAP_TYPE_ARENA {
                let globals = obj.arena.as_ref().filter(|a| a.map == i);
                arenas.push(MappedArena::new(&obj.maps[i], fd.as_fd(), globals)?);
            }
            maps[i] = Some(fd);
        }
        let mut programs: Vec<Option<OwnedFd>> = (0..obj.programs.len()).map(|_| None).collect();
        let mut log = String::new();
        // The selected program first: its rejection is the answer; the others are extras.
        for &i in std::iter::once(&selected).chain(needed_progs.iter().filter(|&&i| i != selected))
        {
            let prog = &obj.programs[i];
            let insns = relocate(prog, &maps)?;
            let level = if i == selected { opts.log_level } else { 0 };
            let result = load_program(obj, prog, &insns, btf_fd, level, opts.log_size);
            match result.fd {
                Ok(fd) => programs[i] = Some(fd),
                Err(errno) if i == selected => {
                    // A load without a log has no reason to show: ask again with one.
                    let log = if result.log.is_empty() {
                        load_program(obj, prog, &insns, btf_fd, kernel::BPF_LOG_LEVEL1, 16 << 20)
                            .log
                    } else {
                        result.log
                    };
                    let lines: Vec<&str> = log.lines().collect();
                    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                    return Err(KernelObjectError::ProgLoad {
                        program: prog.name.clone(),
                        errno,
                        tail,
                        log,
                    });
                }
                Err(errno) => warnings.push(format!(
                    "program {}: the kernel rejects it ({}); the slots naming it stay empty",
                    prog.name,
                    bpfemu_isa::uapi::Errno(errno)
                )),
            }
            if i == selected {
                log = result.log;
            }
        }
        let mut out = KernelObject {
            maps,
            mmapable,
            array_sizes: obj
                .maps
                .iter()
                .map(|m| {
                    (
                        m.max_entries as usize,
                        (m.value_size as usize).div_ceil(8) * 8,
                    )
                })
                .collect(),
            programs,
            map_names: obj.maps.iter().map(|m| m.name.clone()).collect(),
            program_names: obj.programs.iter().map(|p| p.name.clone()).collect(),
            log,
            warnings,
            _arenas: arenas,
            _btf: btf,
        };
        out.fill_slots(obj)?;
        Ok(out)
    }

    /// Writes the initial slots of prog arrays and map-in-maps.
    fn fill_slots(&mut self, obj: &Object) -> Result<(), KernelObjectError> {
        for (i, spec) in obj.maps.iter().enumerate() {
            let Some(map) = &self.maps[i] else { continue };
            for (slot, name) in &spec.init_slots {
                let target = if spec.map_type == PROG_ARRAY {
                    self.program_names
                        .iter()
                        .position(|n| n == name)
                        .and_then(|p| self.programs[p].as_ref())
                } else {
                    self.map_names
                        .iter()
                        .position(|n| n == name)
                        .and_then(|m| self.maps[m].as_ref())
                };
                let Some(target) = target else { continue };
                let value = (target.as_raw_fd() as u32).to_ne_bytes();
                kernel::map_update_fd(map.as_fd(), &slot.to_ne_bytes(), &value, 0).map_err(
                    |errno| KernelObjectError::MapInit {
                        map: spec.name.clone(),
                        errno: format!("slot {slot} = {name}: {}", bpfemu_isa::uapi::Errno(errno)),
                    },
                )?;
            }
        }
        Ok(())
    }

    /// The fd of a loaded program.
    pub fn program_fd(&self, name: &str) -> Option<BorrowedFd<'_>> {
        let i = self.program_names.iter().position(|n| n == name)?;
        self.programs[i].as_ref().map(AsFd::as_fd)
    }

    /// The fd of a map the program uses (`None` for maps it does not need).
    pub fn map_fd(&self, name: &str) -> Option<BorrowedFd<'_>> {
        let i = self.map_names.iter().position(|n| n == name)?;
        self.maps[i].as_ref().map(AsFd::as_fd)
    }

    /// A plain array's contents mapped read-only into this process (`None` when the map is
    /// not one, or the kernel refused `BPF_F_MMAPABLE` for it): element `i` starts at
    /// `i * stride`, with `stride` the value size rounded up to 8, as the kernel lays it out.
    pub fn map_array(&self, name: &str) -> Option<MappedArray> {
        let i = self.map_names.iter().position(|n| n == name)?;
        if !self.mmapable[i] {
            return None;
        }
        let (entries, stride) = self.array_sizes[i];
        MappedArray::new(self.maps[i].as_ref()?.as_fd(), entries * stride, stride)
    }

    /// The selected program's verifier log (empty without a log level).
    pub fn log(&self) -> &str {
        &self.log
    }

    /// What did not stop the load: BTF refused, a slot's program rejected.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// The maps and programs `selected` needs: the maps its instructions refer to, the programs
/// and maps their initial slots name, and so on (indices, in the object's order).
fn closure(obj: &Object, selected: usize) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let mut maps = BTreeSet::new();
    let mut progs = BTreeSet::from([selected]);
    let mut todo_progs = vec![selected];
    let mut todo_maps = Vec::new();
    while !todo_progs.is_empty() || !todo_maps.is_empty() {
        if let Some(p) = todo_progs.pop() {
            for m in map_refs(&obj.programs[p]) {
                if m < obj.maps.len() && maps.insert(m) {
                    todo_maps.push(m);
                }
            }
        }
        if let Some(m) = todo_maps.pop() {
            let spec = &obj.maps[m];
            for (_, name) in &spec.init_slots {
                if spec.map_type == PROG_ARRAY {
                    if let Some(p) = obj.programs.iter().position(|p| &p.name == name)
                        && progs.insert(p)
                    {
                        todo_progs.push(p);
                    }
                } else if let Some(t) = obj.maps.iter().position(|x| &x.name == name)
                    && maps.insert(t)
                {
                    todo_maps.push(t);
                }
            }
        }
    }
    (maps, progs)
}

/// Indices of the maps a program's `ld_imm64`s refer to.
fn map_refs(prog: &ProgramSpec) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut pc = 0;
    while pc < prog.insns.len() {
        let insn = &prog.insns[pc];
        if insn.code == LD_IMM64 {
            let fd_written = prog.unrelocated_map_fds.contains(&pc);
            if matches!(insn.src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) && insn.imm >= 0 && !fd_written
            {
                out.insert(insn.imm as usize);
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    out
}

/// The program's instructions with map indices replaced by map fds.
fn relocate(
    prog: &ProgramSpec,
    maps: &[Option<OwnedFd>],
) -> Result<Vec<RawInsn>, KernelObjectError> {
    let mut insns = prog.insns.clone();
    let mut pc = 0;
    while pc < insns.len() {
        let insn = &mut insns[pc];
        if insn.code == LD_IMM64 {
            // An fd written in the object goes to the kernel as it stands, as libbpf sends it.
            let fd_written = prog.unrelocated_map_fds.contains(&pc);
            if matches!(insn.src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) && !fd_written {
                let fd = usize::try_from(insn.imm)
                    .ok()
                    .and_then(|i| maps.get(i))
                    .and_then(Option::as_ref)
                    .ok_or(KernelObjectError::BadMapRef {
                        program: prog.name.clone(),
                        pc,
                        index: insn.imm,
                    })?;
                insn.imm = fd.as_raw_fd();
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    Ok(insns)
}

fn kernel_spec(spec: &MapSpec, btf: Option<MapBtf>, inner: Option<&OwnedFd>) -> kernel::MapSpec {
    kernel::MapSpec {
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        map_flags: spec.map_flags,
        map_extra: spec.map_extra,
        numa_node: spec.numa_node,
        inner_map_fd: inner.map(AsRawFd::as_raw_fd),
        btf,
        name: kernel::object_name(&spec.name),
    }
}

/// The BTF ids libbpf passes for a map: global data maps have a value type (their DATASEC) and
/// no key type.
fn map_btf(spec: &MapSpec, btf_fd: Option<i32>) -> Option<MapBtf> {
    let fd = btf_fd?;
    let value_type_id = spec.value_type?;
    let key_type_id = match spec.origin {
        MapOrigin::GlobalData { .. } | MapOrigin::Kconfig => 0,
        _ => spec.key_type.unwrap_or(0),
    };
    Some(MapBtf {
        fd,
        key_type_id,
        value_type_id,
    })
}

/// Creates one map (its inner template first), with BTF when there is any, and again without
/// it when the kernel refuses the BTF. A plain top-level array is made mmap()able where the
/// kernel allows it (the program sees no difference), so that its contents can be read in
/// place afterwards; the second value says whether it is.
fn create_map(spec: &MapSpec, btf_fd: Option<i32>) -> Result<(OwnedFd, bool), KernelObjectError> {
    let inner = spec
        .inner
        .as_ref()
        .map(|i| create_map(i, btf_fd).map(|(fd, _)| fd))
        .transpose()?;
    let btf = map_btf(spec, btf_fd);
    let create = |btf: Option<MapBtf>, extra_flags: u32| {
        let mut k = kernel_spec(spec, btf, inner.as_ref());
        k.map_flags |= extra_flags;
        kernel::map_create(&k)
    };
    let already = spec.map_flags & kernel::BPF_F_MMAPABLE != 0;
    if spec.map_type == kernel::BPF_MAP_TYPE_ARRAY
        && !already
        && spec.max_entries > 1
        && let Ok(fd) = create(btf, kernel::BPF_F_MMAPABLE)
    {
        return Ok((fd, true));
    }
    let result = match create(btf, 0) {
        Err(errno) if btf.is_some() => create(None, 0).map_err(|_| errno),
        other => other,
    };
    let mmapable = spec.map_type == kernel::BPF_MAP_TYPE_ARRAY && already;
    result
        .map(|fd| (fd, mmapable))
        .map_err(|errno| KernelObjectError::MapCreate {
            map: spec.name.clone(),
            errno,
            hint: if errno == libc::EPERM {
                " (not root, or no CAP_BPF)".into()
            } else {
                String::new()
            },
        })
}

/// Global data's initial contents (overridden by `given`) and any other entries `given`
/// holds; read-only sections are then frozen.
fn set_initial(
    spec: &MapSpec,
    map: BorrowedFd<'_>,
    given: Option<&Vec<(Vec<u8>, Vec<u8>)>>,
) -> Result<(), KernelObjectError> {
    let err = |errno: i32| KernelObjectError::MapInit {
        map: spec.name.clone(),
        errno: bpfemu_isa::uapi::Errno(errno).to_string(),
    };
    if let Some(initial) = spec.initial.as_ref().filter(|v| v.iter().any(|&b| b != 0)) {
        let mut value = initial.clone();
        value.resize(spec.value_size as usize, 0);
        kernel::map_update_fd(map, &0u32.to_ne_bytes(), &value, 0).map_err(err)?;
    }
    for (key, value) in given.into_iter().flatten() {
        kernel::map_update_fd(map, key, value, 0).map_err(err)?;
    }
    let global = matches!(
        spec.origin,
        MapOrigin::GlobalData { .. } | MapOrigin::Kconfig
    );
    if global && spec.map_flags & BPF_F_RDONLY_PROG != 0 {
        kernel::map_freeze(map).map_err(err)?;
    }
    Ok(())
}

fn load_program(
    obj: &Object,
    prog: &ProgramSpec,
    insns: &[RawInsn],
    btf_fd: Option<i32>,
    log_level: u32,
    log_size: usize,
) -> kernel::LoadResult {
    let license = std::ffi::CString::new(obj.license.clone()).unwrap_or_else(|_| c"GPL".to_owned());
    // As libbpf: the records go with the object's BTF, or not at all when the kernel refused it.
    let (func_info, line_info) = if btf_fd.is_some() {
        (kernel_func_info(prog), kernel_line_info(prog))
    } else {
        (Vec::new(), Vec::new())
    };
    let mut opts = kernel::LoadOptions::new(prog.prog_type, insns);
    opts.expected_attach_type = prog.expected_attach_type.unwrap_or(0);
    opts.prog_flags = prog.prog_flags;
    opts.log_level = log_level;
    opts.log_size = log_size.max(1 << 16);
    opts.prog_btf_fd = btf_fd.filter(|_| !func_info.is_empty() || !line_info.is_empty());
    opts.func_info = &func_info;
    opts.line_info = &line_info;
    opts.prog_name = kernel::object_name(&prog.name);
    opts.license = &license;
    opts.kern_version = obj.kern_version.unwrap_or(0);
    kernel::prog_load(&opts)
}

/// An arena mapped into this process as libbpf maps it after creating it: the kernel takes
/// the mapping's address as the arena's user address (without one, or a `map_extra`, it
/// refuses every program using the arena), and the `__arena` globals' initial bytes are
/// written through it. Where `map_extra` names the address, the mapping is made there, but
/// never over a mapping this process already has (`MAP_FIXED_NOREPLACE` where libbpf says
/// `MAP_FIXED`): the load then fails instead of clobbering memory.
struct MappedArena {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

/// The page size of the kernel profile (x86-64).
const PAGE_SIZE: usize = 4096;

impl MappedArena {
    fn new(
        spec: &MapSpec,
        fd: BorrowedFd<'_>,
        globals: Option<&bpfemu_loader::arena::ArenaGlobals>,
    ) -> Result<MappedArena, KernelObjectError> {
        let failed = |errno: i32| KernelObjectError::ArenaMap {
            map: spec.name.clone(),
            errno,
        };
        let len = PAGE_SIZE * spec.max_entries as usize;
        let flags = if spec.map_extra != 0 {
            libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: a fresh shared mapping of the arena map `fd` (the kernel checks the length
        // against the arena); MAP_FIXED_NOREPLACE never replaces an existing mapping, and no
        // Rust object aliases the new one.
        let ptr = unsafe {
            libc::mmap(
                spec.map_extra as usize as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(failed(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ));
        }
        let ptr = std::ptr::NonNull::new(ptr.cast()).ok_or_else(|| failed(libc::EFAULT))?;
        let arena = MappedArena { ptr, len };
        if let Some(g) = globals {
            let start = usize::try_from(g.offset).unwrap_or(usize::MAX);
            let end = start.checked_add(g.data.len()).filter(|&end| end <= len);
            let end = end.ok_or_else(|| failed(libc::E2BIG))?;
            // SAFETY: `start..end` lies within the `len` writable bytes mapped above; the
            // kernel allocates the arena's pages as they are first written.
            let bytes = unsafe { std::slice::from_raw_parts_mut(arena.ptr.as_ptr(), len) };
            bytes[start..end].copy_from_slice(&g.data);
        }
        Ok(arena)
    }
}

impl Drop for MappedArena {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; nothing borrows it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The program's func_info records, as `BPF_PROG_LOAD` takes them.
fn kernel_func_info(prog: &ProgramSpec) -> Vec<FuncInfo> {
    prog.func_info
        .iter()
        .map(|&(insn, type_id)| FuncInfo {
            insn_off: insn as u32,
            type_id,
        })
        .collect()
}

/// The program's line_info records, as `BPF_PROG_LOAD` takes them: the string offsets are the
/// object's, which stay valid because the BTF sent keeps the object's strings first.
fn kernel_line_info(prog: &ProgramSpec) -> Vec<kernel::LineInfo> {
    prog.line_info
        .iter()
        .map(|l| kernel::LineInfo {
            insn_off: l.insn as u32,
            file_name_off: l.file_name_off,
            line_off: l.line_off,
            line_col: (l.line << 10) | (l.column & 0x3ff),
        })
        .collect()
}

/// A read-only mapping of an mmap()able array map (see [`KernelObject::map_array`]).
pub struct MappedArray {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    stride: usize,
}

impl MappedArray {
    fn new(fd: BorrowedFd<'_>, len: usize, stride: usize) -> Option<MappedArray> {
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh shared, read-only mapping of `len` bytes of an mmap()able array map
        // (the kernel checks the length against the map); nothing else aliases it mutably.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        Some(MappedArray {
            ptr: std::ptr::NonNull::new(ptr.cast())?,
            len,
            stride,
        })
    }

    /// Every element, `stride` bytes apart.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives until `self` drops.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The distance between elements (the value size rounded up to 8).
    pub fn stride(&self) -> usize {
        self.stride
    }
}

impl Drop for MappedArray {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no slice of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
