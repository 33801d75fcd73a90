//! The errno values the kernel answers with (helpers in r0, `bpf()` in `errno`), by name.

use std::fmt;

/// A positive errno. Helpers return it negated in r0 ([`Errno::as_ret`]); the syscall side
/// reports it as the kernel's `bpf()` would set `errno`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const E2BIG: Errno = Errno(7);
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EFAULT: Errno = Errno(14);
    pub const EACCES: Errno = Errno(13);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const ENODEV: Errno = Errno(19);
    pub const EINVAL: Errno = Errno(22);
    pub const ENOSPC: Errno = Errno(28);
    pub const ERANGE: Errno = Errno(34);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EOVERFLOW: Errno = Errno(75);
    pub const EAFNOSUPPORT: Errno = Errno(97);
    /// The kernel-internal `ENOTSUPP` (524), which `bpf()` leaks to user space for some maps.
    pub const ENOTSUPP: Errno = Errno(524);

    /// The value a helper leaves in r0: `-errno` as a 64-bit register.
    pub fn as_ret(self) -> u64 {
        (-(self.0 as i64)) as u64
    }

    /// The symbolic name, when it is one of the values maps and helpers use.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "EPERM",
            2 => "ENOENT",
            7 => "E2BIG",
            9 => "EBADF",
            11 => "EAGAIN",
            12 => "ENOMEM",
            13 => "EACCES",
            14 => "EFAULT",
            16 => "EBUSY",
            17 => "EEXIST",
            19 => "ENODEV",
            22 => "EINVAL",
            28 => "ENOSPC",
            34 => "ERANGE",
            75 => "EOVERFLOW",
            95 => "EOPNOTSUPP",
            97 => "EAFNOSUPPORT",
            524 => "ENOTSUPP",
            _ => return None,
        })
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "errno {}", self.0),
        }
    }
}
