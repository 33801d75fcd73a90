//! The release string an x86 kernel image (bzImage, what Debian ships as vmlinuz) carries in
//! its boot protocol header, read without booting it: what `uname -r` will print there.
//!
//! The real-mode header starts at 0x1f1; `HdrS` at 0x202 marks protocol 2.00 or later, and the
//! 16-bit field at 0x20e points (less 0x200) at a NUL-terminated text such as
//! `6.1.0-47-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP ...`.

use std::path::Path;

const MAGIC_OFFSET: usize = 0x202;
const MAGIC: &[u8; 4] = b"HdrS";
const VERSION_POINTER_OFFSET: usize = 0x20e;
/// The version pointer counts from the end of the 512-byte boot sector.
const VERSION_POINTER_BASE: usize = 0x200;
/// Enough for any release and the build text after it.
const MAX_VERSION_TEXT: usize = 512;

/// Why an image's release could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BzImageError {
    #[error("{path}: cannot read it: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}: not an x86 Linux kernel image (no boot protocol header 'HdrS' at offset 0x202)"
    )]
    NotAKernel { path: String },
    #[error(
        "{path}: the kernel image names no version (boot header field kernel_version at 0x20e is {pointer:#x})"
    )]
    NoVersion { path: String, pointer: usize },
}

/// The release of the kernel image at `path` (`6.12.95+deb12-cloud-amd64`).
pub fn release_of(path: &Path) -> Result<String, BzImageError> {
    let bytes = std::fs::read(path).map_err(|source| BzImageError::Read {
        path: path.display().to_string(),
        source,
    })?;
    release_in(&bytes).map_err(|fault| fault.at(path))
}

/// What is wrong with an image's bytes, before the path is attached.
#[derive(Debug, PartialEq, Eq)]
enum Fault {
    NotAKernel,
    NoVersion(usize),
}

impl Fault {
    fn at(self, path: &Path) -> BzImageError {
        let path = path.display().to_string();
        match self {
            Fault::NotAKernel => BzImageError::NotAKernel { path },
            Fault::NoVersion(pointer) => BzImageError::NoVersion { path, pointer },
        }
    }
}

fn release_in(bytes: &[u8]) -> Result<String, Fault> {
    if bytes.get(MAGIC_OFFSET..MAGIC_OFFSET + 4) != Some(MAGIC) {
        return Err(Fault::NotAKernel);
    }
    let pointer = bytes
        .get(VERSION_POINTER_OFFSET..VERSION_POINTER_OFFSET + 2)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or(Fault::NotAKernel)?;
    let start = pointer + VERSION_POINTER_BASE;
    let text = bytes
        .get(start..)
        .filter(|_| pointer != 0)
        .ok_or(Fault::NoVersion(pointer))?;
    let text = &text[..text.len().min(MAX_VERSION_TEXT)];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let release = String::from_utf8_lossy(&text[..end])
        .split_whitespace()
        .next()
        .map(str::to_owned);
    release
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        .ok_or(Fault::NoVersion(pointer))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header with the magic and a version pointer, the text placed where it points.
    fn image(text: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; 0x400];
        bytes[MAGIC_OFFSET..MAGIC_OFFSET + 4].copy_from_slice(MAGIC);
        let pointer: u16 = 0x100;
        bytes[VERSION_POINTER_OFFSET..VERSION_POINTER_OFFSET + 2]
            .copy_from_slice(&pointer.to_le_bytes());
        let at = usize::from(pointer) + VERSION_POINTER_BASE;
        bytes[at..at + text.len()].copy_from_slice(text);
        bytes
    }

    #[test]
    fn the_release_is_the_first_word_of_the_version_text() {
        let bytes = image(b"6.1.0-47-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP\0");
        assert_eq!(release_in(&bytes).as_deref(), Ok("6.1.0-47-cloud-amd64"));
    }

    #[test]
    fn a_file_without_the_magic_is_not_a_kernel() {
        assert_eq!(release_in(b"#!/bin/sh\necho hi\n"), Err(Fault::NotAKernel));
        let mut bytes = image(b"6.1.0\0");
        bytes[MAGIC_OFFSET] = b'X';
        assert_eq!(release_in(&bytes), Err(Fault::NotAKernel));
    }

    #[test]
    fn a_pointer_past_the_end_or_at_zero_names_no_version() {
        let mut bytes = image(b"6.1.0\0");
        bytes[VERSION_POINTER_OFFSET..VERSION_POINTER_OFFSET + 2].copy_from_slice(&[0xff, 0x7f]);
        assert_eq!(release_in(&bytes), Err(Fault::NoVersion(0x7fff)));
        bytes[VERSION_POINTER_OFFSET..VERSION_POINTER_OFFSET + 2].copy_from_slice(&[0, 0]);
        assert_eq!(release_in(&bytes), Err(Fault::NoVersion(0)));
    }
}
