//! Why a load failed: every variant names the file and the place in it (section, offset,
//! instruction, map or extern), so a user can find the culprit without a debugger.

use std::path::PathBuf;

/// A boxed cause from another part of the loader (BTF parser, CO-RE).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Truncated or corrupt ELF: headers, section table, symbols, strings.
    #[error("{file}: corrupt ELF: {message}")]
    Elf { file: String, message: String },

    /// A well-formed ELF that is not a BPF object (class, byte order, machine).
    #[error("{file}: not a BPF object: {message}")]
    NotBpf { file: String, message: String },

    /// A program's code does not fit its section or has a bad size.
    #[error("{file}: section '{section}': program '{program}': {message}")]
    Program {
        file: String,
        section: String,
        program: String,
        message: String,
    },

    /// A relocation that cannot be applied.
    #[error("{file}: section '{section}': relocation at offset {offset:#x}: {message}")]
    Relocation {
        file: String,
        section: String,
        offset: u64,
        message: String,
    },

    /// A subprogram call or callback address that cannot be linked.
    #[error("{file}: program '{program}': instruction {insn}: {message}")]
    Link {
        file: String,
        program: String,
        insn: usize,
        message: String,
    },

    /// `.BTF` or `.BTF.ext` that does not parse.
    #[error("{file}: section '{section}': malformed BTF: {source}")]
    Btf {
        file: String,
        section: &'static str,
        #[source]
        source: Cause,
    },

    /// The target BTF (vmlinux) cannot be read or parsed.
    #[error("{file}: target BTF {}: {message}", path.display())]
    TargetBtf {
        file: String,
        path: PathBuf,
        message: String,
    },

    /// `__arena` globals libbpf would refuse (no arena map for them, or one too small).
    #[error("{file}: section '.addr_space.1': {message}")]
    Arena { file: String, message: String },

    /// A map definition libbpf would refuse.
    #[error("{file}: map '{map}': {message}")]
    Map {
        file: String,
        map: String,
        message: String,
    },

    /// Maps declared with `max_entries` 0 (sized at run time) and no `--map-size` for them.
    #[error(
        "{file}: {} sized at run time (max_entries 0): give {} with {}",
        if maps.len() == 1 { format!("map '{}' is", maps[0]) } else {
            format!("maps {} are", maps.iter().map(|m| format!("'{m}'")).collect::<Vec<_>>().join(", "))
        },
        if maps.len() == 1 { "its size" } else { "their sizes" },
        maps.iter().map(|m| format!("--map-size {m}=N")).collect::<Vec<_>>().join(" ")
    )]
    MapSize { file: String, maps: Vec<String> },

    /// A `.kconfig` or `.ksyms` extern that cannot be resolved.
    #[error("{file}: extern '{name}': {message}")]
    Extern {
        file: String,
        name: String,
        message: String,
    },

    /// A CO-RE relocation that does not resolve against the target BTF.
    #[error("{file}: section '{section}': CO-RE relocation failed: {source}")]
    Core {
        file: String,
        section: String,
        #[source]
        source: Cause,
    },
}
