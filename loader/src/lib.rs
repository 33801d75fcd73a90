//! Loads the BPF ELF objects clang builds, as libbpf 1.7 prepares them for the kernel: programs
//! from their sections with subprograms appended in libbpf's order, BTF-defined, legacy and
//! global-data maps with libbpf's names, `.kconfig` and `.ksyms` externs resolved, CO-RE
//! applied, func_info and line_info following the code.
//!
//! Objects libbpf does not load get the rule of the loader that does ([`Naming`], shown by
//! `inspect`): a section with code but no function symbol (stripped, hand-written, or from the
//! old samples/bpf toolchains; even without any symbol table) is one program named by its
//! section, as iproute2's legacy loader takes it; a `static` function in a program section is a
//! program, as cilium/ebpf makes it. Objects libbpf loads load as before.
//!
//! Where the kernel would get a map fd, instructions hold the map's index in
//! [`Object::maps`] (see [`object`]).
//!
//! ```no_run
//! use bpfemu_loader::{LoadOptions, load_file};
//! use std::path::Path;
//!
//! let obj = load_file(Path::new("prog.o"), &LoadOptions::default()).unwrap();
//! for prog in &obj.programs {
//!     println!("{} ({}): {} insns", prog.name, prog.section, prog.insns.len());
//! }
//! ```

pub mod arena;
pub mod btf;
mod btf_fixup;
pub mod core_relo;
mod elf;
pub mod error;
mod externs;
pub mod iproute2;
pub mod kernel;
pub mod libbpf_log;
mod load;
mod maps;
pub mod object;
mod reloc;
pub mod section;

pub use error::LoadError;
pub use kernel::{Kernel, KernelBtfError, VersionChoice};
pub use maps::internal_map_name;
pub use object::{
    ElfMapFields, MapOrigin, MapSpec, Naming, Object, PoisonCause, PoisonedCall, ProgramSpec,
    SourceLine,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a load may take from outside the object.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The kernel the object is loaded into: CO-RE relocations and ksyms resolve against its
    /// BTF (read only when the object needs it), and the [`Object`] keeps it for whoever
    /// judges or runs its programs. Default: the running kernel.
    pub kernel: Kernel,
    /// `max_entries` for maps declared with 0 (`--map-size NAME=N`); also overrides others.
    pub map_sizes: BTreeMap<String, u32>,
    /// Kernel config for `.kconfig` `CONFIG_*` externs (plain or gzip); `None`:
    /// `/boot/config-$(uname -r)`, then `/proc/config.gz`, as libbpf.
    pub kconfig: Option<PathBuf>,
    /// The program type of programs whose section name says none, as the loading command
    /// gives it: iproute2 types every program of an object by its command (`ip link set dev
    /// DEV xdp obj FILE sec S`: XDP), whatever the section (`prog`, tail calls in `ID/KEY`).
    /// `None`: such programs keep type 0 (unspecified), as libbpf leaves them.
    pub untyped_prog_type: Option<u32>,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            kernel: Kernel::running(),
            map_sizes: BTreeMap::new(),
            kconfig: None,
            untyped_prog_type: None,
        }
    }
}

/// Loads the object at `path`; messages name it as given.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Object, LoadError> {
    let data = std::fs::read(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load_bytes(&path.display().to_string(), &data, opts)
}

/// Loads an object from memory; `name` is its file name (it names maps, as libbpf's object
/// name does, and appears in messages).
pub fn load_bytes(name: &str, data: &[u8], opts: &LoadOptions) -> Result<Object, LoadError> {
    load::load(name, data, opts)
}
