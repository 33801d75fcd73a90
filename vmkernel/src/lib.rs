//! Other Linux kernels as judges: boots Debian's kernel images under QEMU (TCG, so no KVM and
//! no root are needed) with an initramfs of jobs, and returns each job's output and status.
//! It is the ground truth behind bpfemu's per-kernel answers (issue 23): the verdicts of
//! 5.10, 6.1, 6.12 and 7.2 come from those kernels booted for real.
//!
//! - [`images`]: the kernels as Debian packages them, fetched into a cache with apt.
//! - [`initramfs`]: a `newc` cpio writer (and reader), binaries carried with their libraries.
//! - [`guest`]: the `/init` side, which runs the jobs and reports on the console.
//! - [`boot`]: the host side, [`Vm`]: build, boot, time out, parse.
//! - [`frame`]: the console records both sides share.
//! - [`bzimage`]: the release an image names in its boot header, read without booting it.
//! - [`test_images`]: an image for a test, or a skip.

pub mod boot;
pub mod bzimage;
pub mod frame;
pub mod guest;
pub mod images;
pub mod initramfs;
pub mod test_images;

pub use boot::{JobResult, JobStatus, Results, Vm, VmError};
