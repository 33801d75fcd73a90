//! bpfemu's judges: the bpf_conformance ISA suite and the running kernel.
//!
//! - [`suite`] parses bpf_conformance `.data` files; [`runner`] runs them on bpfemu with the
//!   suite's convention and reports `N passed, M failed, K skipped`.
//! - [`plugin`] is the upstream plugin protocol (the `bpfemu-conformance-plugin` binary).
//! - [`kernel`] reaches the running kernel through the bpf() syscall: the oracle every claim of
//!   fidelity is checked against.
//! - [`kernel_object`] loads one program of a loaded object, and the maps and programs it
//!   needs, into the kernel (the kernel side of `bpfemu diff`).
//! - [`kernel_events`] reads the records a program emitted in the kernel (ring buffers, perf
//!   event arrays), as user-space consumers read them.
//! - [`kernel_isa`] runs the bpf_conformance suite through the kernel (each test wrapped in an
//!   XDP program that stores the full r0 in a map) and compares every result with bpfemu's.
//! - `libbpf` (feature `libbpf`, for tests only): libbpf 1.7 as the independent judge of the
//!   loader; it needs libelf and zlib to build, which the product does not.
//! - [`netns`] builds private network namespaces (one from a FIB file) for the comparisons
//!   that depend on routes, neighbours and devices.
//!
//! ```no_run
//! use bpfemu_conformance::runner::{self, EngineKind, Mode};
//! let reports = runner::run_dir("tests".as_ref(), EngineKind::Interp).unwrap();
//! println!("{}", runner::summarize(&reports, Mode::ExpectPass));
//! ```

pub mod kernel;
pub mod kernel_events;
pub mod kernel_isa;
pub mod kernel_object;
#[cfg(feature = "libbpf")]
pub mod libbpf;
pub mod netns;
pub mod plugin;
pub mod runner;
pub mod suite;
