//! SHA-256 digests of the files that identify a run (object, capture, map setup), so that an
//! expectations file can say which of them changed. A capture is digested as it streams by.

use sha2::{Digest, Sha256};
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    crate::replay::hex(&Sha256::digest(bytes))
}

/// The SHA-256 of a file's contents, in lowercase hex.
pub fn file_sha256(path: &Path) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher)?;
    Ok(crate::replay::hex(&hasher.finalize()))
}

/// The digest of everything a [`HashingReader`] has passed on so far.
#[derive(Clone, Default)]
pub struct StreamDigest(Arc<Mutex<Sha256>>);

impl StreamDigest {
    /// The SHA-256 of the bytes read so far, in lowercase hex.
    pub fn hex(&self) -> String {
        let hasher = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        crate::replay::hex(&hasher.finalize())
    }
}

/// Passes bytes through from `inner`, digesting them on the way.
pub struct HashingReader<R> {
    inner: R,
    digest: StreamDigest,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> (HashingReader<R>, StreamDigest) {
        let digest = StreamDigest::default();
        let reader = HashingReader {
            inner,
            digest: digest.clone(),
        };
        (reader, digest)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digest
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_digest_equals_the_digest_of_the_whole() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let (mut reader, digest) = HashingReader::new(io::Cursor::new(data.clone()));
        let mut sink = Vec::new();
        let mut buf = [0u8; 333];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            sink.extend_from_slice(&buf[..n]);
        }
        assert_eq!(sink, data);
        assert_eq!(digest.hex(), sha256(&data));
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
