//! A capture file truncated while it is mapped: reading a page past its new end raises SIGBUS.
//! Rather than die of the signal, bpfemu says so in one line naming the file and the byte, and
//! exits with the code of bad input (2). The process cannot go on: the read that faulted was
//! in the middle of a packet, and a signal handler can do little safely beyond writing and
//! exiting.
//!
//! Only the capture mapped last is watched (a replay maps one); a SIGBUS at any other address
//! keeps the signal's default action.

use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The watched mapping's bytes, `[START, END)`; empty when none is watched.
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// The start of the line said ("bpfemu: FILE: truncated while it was read (byte "), leaked
/// once per file watched.
static PREFIX: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static PREFIX_LEN: AtomicUsize = AtomicUsize::new(0);

const SUFFIX: &[u8] = b" is gone)\n";
/// The exit code of bad input.
const EXIT_BAD_INPUT: i32 = 2;

/// Watches `bytes`, the mapping of the capture `path`, until [`unwatch`].
pub fn watch(bytes: &[u8], path: &Path) {
    let prefix: &'static [u8] = format!(
        "bpfemu: {}: truncated while it was read (byte ",
        path.display()
    )
    .into_bytes()
    .leak();
    // The bounds go first to empty, so that the handler never pairs one file's bounds with
    // another's name.
    END.store(0, Ordering::SeqCst);
    PREFIX_LEN.store(prefix.len(), Ordering::SeqCst);
    PREFIX.store(prefix.as_ptr().cast_mut(), Ordering::SeqCst);
    START.store(bytes.as_ptr().addr(), Ordering::SeqCst);
    END.store(bytes.as_ptr().addr() + bytes.len(), Ordering::SeqCst);
    static INSTALL: Once = Once::new();
    INSTALL.call_once(install);
}

/// Stops watching `bytes` (its mapping is going away), unless another mapping is watched.
pub fn unwatch(bytes: &[u8]) {
    let start = bytes.as_ptr().addr();
    if START
        .compare_exchange(start, 0, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        END.store(0, Ordering::SeqCst);
    }
}

fn install() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler has the
    // SA_SIGINFO signature and calls only async-signal-safe functions (write, _exit, signal).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// Says which byte of the watched file is gone and exits; a SIGBUS elsewhere gets the
/// signal's default action (the faulting access runs again, and ends the process).
extern "C" fn on_sigbus(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let address = unsafe { (*info).si_addr() }.addr();
    let (start, end) = (START.load(Ordering::SeqCst), END.load(Ordering::SeqCst));
    if !(start..end).contains(&address) {
        // SAFETY: restoring the default action is async-signal-safe.
        unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        return;
    }
    let prefix = PREFIX.load(Ordering::SeqCst);
    let prefix_len = PREFIX_LEN.load(Ordering::SeqCst);
    let mut digits = [0u8; 20];
    let offset = decimal(address - start, &mut digits);
    // SAFETY: `prefix` and `prefix_len` describe a leaked, never freed string (set before
    // the bounds that brought us here); write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, prefix.cast(), prefix_len);
        libc::write(2, offset.as_ptr().cast(), offset.len());
        libc::write(2, SUFFIX.as_ptr().cast(), SUFFIX.len());
        libc::_exit(EXIT_BAD_INPUT);
    }
}

/// `n` in decimal, in the end of `buffer` (no allocation: this runs in a signal handler).
fn decimal(mut n: usize, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buffer[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_without_allocation() {
        let mut buffer = [0; 20];
        assert_eq!(decimal(0, &mut buffer), b"0");
        assert_eq!(decimal(4096, &mut buffer), b"4096");
        assert_eq!(
            decimal(usize::MAX, &mut buffer),
            usize::MAX.to_string().as_bytes()
        );
    }
}
