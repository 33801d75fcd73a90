//! An initramfs as the kernel unpacks it: a `newc` cpio archive (uncompressed, which every
//! kernel accepts), written without root or any external tool, so that device nodes and
//! root-owned files are just headers.
//!
//! [`Initramfs`] collects entries and creates the parent directories of each as it goes (the
//! kernel's unpacker does not); [`Initramfs::binary`] adds a host binary together with the
//! shared libraries and ELF interpreter `ldd` lists for it, at the same paths, so that a
//! dynamically linked program runs in the guest as it does on the host.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;
const S_IFMT: u32 = 0o170000;
const NEWC_MAGIC: &[u8; 6] = b"070701";
const TRAILER: &str = "TRAILER!!!";

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink { target: String },
    CharDevice { major: u32, minor: u32 },
}

/// Where a file's bytes come from: memory, or a host file read while the archive is written
/// (so that large binaries are not held in memory).
#[derive(Debug, Clone)]
enum Content {
    Empty,
    Bytes(Vec<u8>),
    HostFile { path: PathBuf, size: u64 },
}

#[derive(Debug, Clone)]
struct Entry {
    /// The path inside the archive, without a leading `/`.
    name: String,
    kind: Kind,
    permissions: u32,
    content: Content,
}

/// An entry as [`read_newc`] finds it in an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadEntry {
    pub name: String,
    pub kind: Kind,
    pub permissions: u32,
    pub data: Vec<u8>,
}

/// Errors of building or reading an archive, each naming the file or entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum InitramfsError {
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("ldd {path}: {reason}")]
    Ldd { path: String, reason: String },
    #[error("cpio archive, offset {offset}: {reason}")]
    Malformed { offset: usize, reason: String },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> InitramfsError + '_ {
    move |source| InitramfsError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The archive being built.
#[derive(Debug, Default)]
pub struct Initramfs {
    entries: Vec<Entry>,
    dirs: BTreeSet<String>,
}

fn archive_name(path: &str) -> String {
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_owned()
}

impl Initramfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The usual skeleton: `/dev/console` (5:1, where the kernel points init's standard
    /// streams), `/dev/null` (1:3), and the mount points `/proc` and `/sys`.
    pub fn with_skeleton() -> Self {
        let mut archive = Self::new();
        archive.char_device("/dev/console", 0o600, 5, 1);
        archive.char_device("/dev/null", 0o666, 1, 3);
        archive.dir("/proc", 0o755);
        archive.dir("/sys", 0o755);
        archive.dir("/tmp", 0o1777);
        archive
    }

    /// A directory (and its parents); adding one twice adds it once.
    pub fn dir(&mut self, path: &str, permissions: u32) {
        let name = archive_name(path);
        if name.is_empty() || self.dirs.contains(&name) {
            return;
        }
        self.parents_of(&name);
        self.dirs.insert(name.clone());
        self.push(name, Kind::Dir, permissions, Content::Empty);
    }

    /// A regular file holding `data`.
    pub fn file(&mut self, path: &str, permissions: u32, data: Vec<u8>) {
        let name = archive_name(path);
        self.parents_of(&name);
        self.push(name, Kind::File, permissions, Content::Bytes(data));
    }

    /// A regular file with the contents of a host file, read when the archive is written.
    pub fn host_file(
        &mut self,
        path: &str,
        permissions: u32,
        host: &Path,
    ) -> Result<(), InitramfsError> {
        let size = std::fs::metadata(host).map_err(io_error(host))?.len();
        let name = archive_name(path);
        self.parents_of(&name);
        let content = Content::HostFile {
            path: host.to_owned(),
            size,
        };
        self.push(name, Kind::File, permissions, content);
        Ok(())
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        let name = archive_name(path);
        self.parents_of(&name);
        let kind = Kind::Symlink {
            target: target.to_owned(),
        };
        self.push(name, kind, 0o777, Content::Empty);
    }

    pub fn char_device(&mut self, path: &str, permissions: u32, major: u32, minor: u32) {
        let name = archive_name(path);
        self.parents_of(&name);
        self.push(
            name,
            Kind::CharDevice { major, minor },
            permissions,
            Content::Empty,
        );
    }

    /// The host binary `host` at `path`, with every library and the interpreter `ldd` names
    /// for it at their host paths (each added once however many binaries need it).
    pub fn binary(&mut self, path: &str, host: &Path) -> Result<(), InitramfsError> {
        self.host_file(path, 0o755, host)?;
        for library in shared_libraries(host)? {
            let name = library.display().to_string();
            if self.entries.iter().any(|e| e.name == archive_name(&name)) {
                continue;
            }
            self.host_file(&name, 0o755, &library)?;
        }
        Ok(())
    }

    /// The archive's size once written, to size the guest's memory.
    pub fn size(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| header_len(&e.name) + pad4(content_len(e)))
            .sum::<u64>()
            + header_len(TRAILER)
    }

    /// Writes the archive: every entry, then the trailer.
    pub fn write_to(&self, out: &mut impl Write) -> Result<(), InitramfsError> {
        let to_archive = |source| InitramfsError::Io {
            path: "initramfs".into(),
            source,
        };
        for (index, entry) in self.entries.iter().enumerate() {
            let ino = u32::try_from(index + 1).unwrap_or(u32::MAX);
            write_header(out, entry, ino).map_err(to_archive)?;
            write_content(out, entry)?;
        }
        let trailer = Entry {
            name: TRAILER.into(),
            kind: Kind::File,
            permissions: 0,
            content: Content::Empty,
        };
        write_header(out, &trailer, 0).map_err(to_archive)
    }

    fn parents_of(&mut self, name: &str) {
        if let Some((parent, _)) = name.rsplit_once('/') {
            self.dir(parent, 0o755);
        }
    }

    fn push(&mut self, name: String, kind: Kind, permissions: u32, content: Content) {
        self.entries.push(Entry {
            name,
            kind,
            permissions,
            content,
        });
    }
}

fn pad4(len: u64) -> u64 {
    len.div_ceil(4) * 4
}

/// The header (110 bytes), the name and its NUL, padded to 4 bytes.
fn header_len(name: &str) -> u64 {
    pad4(110 + name.len() as u64 + 1)
}

fn content_len(entry: &Entry) -> u64 {
    match (&entry.kind, &entry.content) {
        (Kind::Symlink { target }, _) => target.len() as u64,
        (_, Content::Bytes(bytes)) => bytes.len() as u64,
        (_, Content::HostFile { size, .. }) => *size,
        (_, Content::Empty) => 0,
    }
}

fn write_header(out: &mut impl Write, entry: &Entry, ino: u32) -> io::Result<()> {
    let (type_bits, rdev) = match entry.kind {
        Kind::Dir => (S_IFDIR, (0, 0)),
        Kind::File => (S_IFREG, (0, 0)),
        Kind::Symlink { .. } => (S_IFLNK, (0, 0)),
        Kind::CharDevice { major, minor } => (S_IFCHR, (major, minor)),
    };
    let mode = if entry.name == TRAILER {
        0
    } else {
        type_bits | (entry.permissions & 0o7777)
    };
    let nlink = if entry.kind == Kind::Dir { 2 } else { 1 };
    let size = u32::try_from(content_len(entry))
        .map_err(|_| io::Error::other(format!("{}: larger than 4 GiB", entry.name)))?;
    let fields = [
        ino,
        mode,
        0, // uid: root
        0, // gid: root
        nlink,
        0, // mtime
        size,
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        entry.name.len() as u32 + 1,
        0, // check: unused by newc
    ];
    let mut header = Vec::with_capacity(header_len(&entry.name) as usize);
    header.extend_from_slice(NEWC_MAGIC);
    for field in fields {
        header.extend_from_slice(format!("{field:08x}").as_bytes());
    }
    header.extend_from_slice(entry.name.as_bytes());
    header.push(0);
    header.resize(pad4(header.len() as u64) as usize, 0);
    out.write_all(&header)
}

fn write_content(out: &mut impl Write, entry: &Entry) -> Result<(), InitramfsError> {
    let to_archive = |source| InitramfsError::Io {
        path: entry.name.clone(),
        source,
    };
    let len = content_len(entry);
    match (&entry.kind, &entry.content) {
        (Kind::Symlink { target }, _) => out.write_all(target.as_bytes()).map_err(to_archive)?,
        (_, Content::Bytes(bytes)) => out.write_all(bytes).map_err(to_archive)?,
        (_, Content::HostFile { path, size }) => {
            let file = std::fs::File::open(path).map_err(io_error(path))?;
            // A file that changed size since it was added would break every offset after it.
            let copied = io::copy(&mut file.take(*size), out).map_err(io_error(path))?;
            if copied != *size {
                return Err(InitramfsError::Io {
                    path: path.display().to_string(),
                    source: io::Error::other(format!("shrank from {size} to {copied} bytes")),
                });
            }
        }
        (_, Content::Empty) => {}
    }
    let padding = (pad4(len) - len) as usize;
    out.write_all(&[0u8; 3][..padding]).map_err(to_archive)
}

/// The libraries and interpreter `ldd` lists for `binary`, as absolute host paths (the vDSO,
/// which has no file, left out). A static binary has none.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, InitramfsError> {
    let ldd_error = |reason: String| InitramfsError::Ldd {
        path: binary.display().to_string(),
        reason,
    };
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| ldd_error(format!("cannot run ldd: {e}")))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        // ldd says so, and fails, for a static binary: it needs nothing.
        if text.contains("not a dynamic executable") || stderr.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(ldd_error(stderr.trim().to_owned()));
    }
    let mut libraries = Vec::new();
    for line in text.lines() {
        if line.contains("not found") {
            return Err(ldd_error(format!("missing library: {}", line.trim())));
        }
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
        let path = line
            .split_whitespace()
            .find(|word| word.starts_with('/'))
            .map(PathBuf::from);
        if let Some(path) = path {
            libraries.push(path);
        }
    }
    Ok(libraries)
}

/// Reads a `newc` archive back, up to its trailer: to check what was written.
pub fn read_newc(bytes: &[u8]) -> Result<Vec<ReadEntry>, InitramfsError> {
    let mut entries = Vec::new();
    let mut offset = 0usize;
    loop {
        let start = offset;
        let malformed = move |reason: &str| InitramfsError::Malformed {
            offset: start,
            reason: reason.to_owned(),
        };
        let header = bytes
            .get(offset..offset + 110)
            .ok_or_else(|| malformed("truncated header"))?;
        if &header[..6] != NEWC_MAGIC {
            return Err(malformed("no newc magic 070701"));
        }
        let field = |i: usize| {
            std::str::from_utf8(&header[6 + 8 * i..14 + 8 * i])
                .ok()
                .and_then(|t| u32::from_str_radix(t, 16).ok())
                .ok_or_else(|| malformed("a header field is not hex"))
        };
        let (mode, size, rdev_major, rdev_minor, name_size) =
            (field(1)?, field(6)?, field(9)?, field(10)?, field(11)?);
        let name_end = offset + 110 + name_size as usize;
        let name_bytes = bytes
            .get(offset + 110..name_end.saturating_sub(1))
            .ok_or_else(|| malformed("truncated name"))?;
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        let data_start = pad4(name_end as u64) as usize;
        let data = bytes
            .get(data_start..data_start + size as usize)
            .ok_or_else(|| malformed("truncated data"))?
            .to_vec();
        offset = pad4((data_start + size as usize) as u64) as usize;
        if name == TRAILER {
            return Ok(entries);
        }
        let kind = match mode & S_IFMT {
            S_IFDIR => Kind::Dir,
            S_IFREG => Kind::File,
            S_IFLNK => Kind::Symlink {
                target: String::from_utf8_lossy(&data).into_owned(),
            },
            S_IFCHR => Kind::CharDevice {
                major: rdev_major,
                minor: rdev_minor,
            },
            _ => return Err(malformed("unknown file type")),
        };
        entries.push(ReadEntry {
            name,
            kind,
            permissions: mode & 0o7777,
            data,
        });
    }
}
