//! Errno values XDP helpers answer with that the map layer has no use for.

use crate::maps::Errno;

pub const EACCES: Errno = Errno(13);
pub const ERANGE: Errno = Errno(34);
pub const EAFNOSUPPORT: Errno = Errno(97);

/// A helper's r0 for a result: 0 or `-errno`.
pub fn ret(result: Result<(), Errno>) -> u64 {
    match result {
        Ok(()) => 0,
        Err(e) => e.as_ret(),
    }
}
