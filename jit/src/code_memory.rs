//! Executable memory for code a tier emits itself (the baseline's; Cranelift's module keeps its
//! own): written while mapped read-write, then mapped read-execute, never both at once.

/// Executable memory holding a program set's code: written while mapped read-write, then
/// mapped read-execute, never both; unmapped on drop.
pub struct CodeMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory is immutable after construction and owned by this value alone.
unsafe impl Send for CodeMemory {}
// SAFETY: as above: shared access only reads (executes) it.
unsafe impl Sync for CodeMemory {}

impl CodeMemory {
    /// Copies `code` into fresh pages and makes them executable.
    pub fn new(code: &[u8]) -> Result<CodeMemory, String> {
        let len = code.len().max(1);
        // SAFETY: an anonymous private mapping, not aliasing any Rust object.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {len} bytes of code: {}",
                std::io::Error::last_os_error()
            ));
        }
        let memory = CodeMemory {
            ptr: ptr as *mut u8,
            len,
        };
        // SAFETY: the mapping is `len >= code.len()` bytes, writable, and ours alone.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), memory.ptr, code.len()) };
        // SAFETY: the mapping is ours; from now on it is only read and executed.
        if unsafe { libc::mprotect(ptr, len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
            return Err(format!(
                "mprotect of the code: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(memory)
    }

    /// The first byte of the code.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The code's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` with this length and nothing points into it
        // any more (the compiled functions die with their `Compiled`).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::CodeMemory;

    /// The permissions `/proc/self/maps` gives the mapping that holds `addr`.
    fn permissions_at(addr: usize) -> Option<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines().find_map(|line| {
            let (range, rest) = line.split_once(' ')?;
            let (lo, hi) = range.split_once('-')?;
            let (lo, hi) = (
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
            );
            (lo..hi)
                .contains(&addr)
                .then(|| rest.split(' ').next().unwrap_or("").to_owned())
        })
    }

    #[test]
    fn code_is_executable_and_never_writable() {
        // mov eax, 42; ret
        let code = CodeMemory::new(&[0xb8, 42, 0, 0, 0, 0xc3]).unwrap();
        let addr = code.ptr as usize;
        assert_eq!(permissions_at(addr).as_deref(), Some("r-xp"));
        // SAFETY: the bytes are a complete function of this signature.
        let f = unsafe { std::mem::transmute::<*mut u8, extern "C" fn() -> u32>(code.ptr) };
        assert_eq!(f(), 42);
        drop(code);
        assert_ne!(permissions_at(addr).as_deref(), Some("r-xp"));
    }
}
