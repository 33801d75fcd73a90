//! The errno values XDP helpers answer with beyond the maps' (named in [`Errno`]), and r0
//! for a helper's result.

use crate::maps::Errno;

pub const EACCES: Errno = Errno::EACCES;
pub const ERANGE: Errno = Errno::ERANGE;
pub const EAFNOSUPPORT: Errno = Errno::EAFNOSUPPORT;

/// A helper's r0 for a result: 0 or `-errno`.
pub fn ret(result: Result<(), Errno>) -> u64 {
    match result {
        Ok(()) => 0,
        Err(e) => e.as_ret(),
    }
}
