//! A capture file truncated while bpfemu reads it through its mapping: one line naming the file
//! and the byte that is gone, and the exit code of bad input, not a death by SIGBUS.
//!
//! Alone in its test binary: the reader watches the capture it mapped last, so no other test
//! may map one meanwhile.

use bpfemu::pcap::{PcapReader, PcapWriter};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

#[test]
fn a_capture_truncated_under_the_mapping_is_said_in_one_line() {
    let path = std::env::temp_dir().join(format!("bpfemu-shrinks-{}.pcap", std::process::id()));
    let mut writer = PcapWriter::create(&path, false).unwrap();
    for i in 0..100 {
        writer.write(i * 1000, &[0x5a; 1000]).unwrap();
    }
    writer.finish().unwrap();
    let mut reader = PcapReader::open(&path).unwrap();
    assert!(reader.is_mapped());
    // Another process truncates the capture after its second page, under the mapping.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(8192)
        .unwrap();

    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe() returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just opened by pipe() and are owned here alone.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child only reads the mapping (no allocation, no lock: the reader's fast path
    // over whole classic records) and calls async-signal-safe functions, as a child of a
    // multithreaded process must.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: see above; `write_end` stays open until _exit.
        unsafe { libc::dup2(write_end.as_raw_fd(), 2) };
        let mut frames = 0;
        while let Some(Ok(packet)) = reader.next_ref() {
            // The program would read the frame's bytes.
            std::hint::black_box(packet.data.iter().fold(0u8, |x, b| x ^ b));
            frames += 1;
        }
        // Not reached: the record across byte 8192 faults first.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(100 + frames.min(100)) };
    }
    assert!(child > 0, "fork failed");
    drop(write_end);
    let mut status = 0;
    // SAFETY: `child` is this process's child; `status` receives its exit status.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    let mut said = String::new();
    std::fs::File::from(read_end)
        .read_to_string(&mut said)
        .unwrap();
    let _ = std::fs::remove_file(&path);

    assert!(
        libc::WIFEXITED(status),
        "the reader died of signal {}",
        libc::WTERMSIG(status)
    );
    assert_eq!(libc::WEXITSTATUS(status), 2, "{said}");
    let name = Path::new(&path).display().to_string();
    let byte = said
        .strip_prefix(&format!(
            "bpfemu: {name}: truncated while it was read (byte "
        ))
        .and_then(|rest| rest.strip_suffix(" is gone)\n"))
        .and_then(|n| n.parse::<u64>().ok());
    // The first byte past the new end that the reader or the frame's reader touched.
    assert!(byte.is_some_and(|n| (8192..9168).contains(&n)), "{said}");
}
