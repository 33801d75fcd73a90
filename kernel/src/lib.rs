//! bpfemu's one door to the running kernel.
//!
//! Everything the product asks the kernel goes through this crate, with Rust alone (no C
//! library): every `bpf()` call, the maps and programs it creates, `BPF_PROG_TEST_RUN`, the
//! event rings a program writes, and the network namespaces the comparisons run in. It is what
//! `bpfemu diff` (packets, maps, events, `--verifier` verdicts), `bpfemu bench` and
//! `bpfemu conformance --kernel` compare bpfemu with, and what the judges (`bpfemu-conformance`, the tests) check bpfemu against; nothing else in the
//! workspace makes the syscall.
//!
//! - The crate root is the raw `bpf()` layer: load a program (with its verifier log), load
//!   BTF, create, read, write and freeze maps, run a program, pin a thread to a CPU, and
//!   [`verifier_error_line`] to pick the error out of a verifier log.
//! - [`object`] loads one program of a loaded object, and the maps and programs it needs, into
//!   the kernel (the kernel side of `bpfemu diff`).
//! - [`events`] reads the records a program emitted in the kernel (ring buffers, perf event
//!   arrays), as user-space consumers read them.
//! - [`netns`] builds private network namespaces (one from a FIB file) for the comparisons
//!   that depend on routes, neighbours and devices.
//! - [`sockets`] opens the sockets of a socket table in a namespace, for the comparisons of
//!   the socket lookups.
//!
//! `unsafe` is confined to this crate's FFI (the syscall, `mmap` of the event rings, `setns`,
//! the socket calls);
//! each block says why it holds.
//!
//! ```no_run
//! use bpfemu_kernel::{self as kernel, BPF_PROG_TYPE_XDP, LoadOptions};
//! if kernel::kernel_available() {
//!     let exit = bpfemu_isa::RawInsn::new(0x95, 0, 0, 0, 0);
//!     let mov = bpfemu_isa::RawInsn::new(0xb7, 0, 0, 0, 2);
//!     let loaded = kernel::prog_load(&LoadOptions::new(BPF_PROG_TYPE_XDP, &[mov, exit]));
//!     println!("{}", kernel::verifier_error_line(&loaded.log));
//! }
//! ```

// The syscall layer is the crate's root API (`bpfemu_kernel::prog_load`, ...); the module
// only keeps the file, and its history, apart from the docs above.
mod syscall;
pub use syscall::*;

pub mod events;
pub mod netns;
pub mod object;
pub mod sockets;
