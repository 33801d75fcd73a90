//! `bpfemu conformance`: the bpf_conformance ISA suite run on bpfemu, or through the kernel
//! and compared with bpfemu.
//!
//! This is the command's product code, not a judge: the judges (the libbpf oracle, the
//! upstream plugin, the fuzz target bodies and the tests) live in the `bpfemu-conformance`
//! crate, which the product does not depend on.
//!
//! - [`suite`] parses bpf_conformance `.data` files; [`runner`] runs them on bpfemu with the
//!   suite's convention and reports `N passed, M failed, K skipped`.
//! - [`kernel_isa`] runs the suite through the kernel (each test wrapped in an XDP program
//!   that stores the full r0 in a map, loaded through `bpfemu_kernel`) and compares every
//!   result with bpfemu's (`bpfemu conformance --kernel`).
//!
//! ```no_run
//! use bpfemu::conformance::runner::{self, Mode};
//! use bpfemu::jit::Engine;
//! let reports = runner::run_dir("tests".as_ref(), Engine::Interp).unwrap();
//! println!("{}", runner::summarize(&reports, Mode::ExpectPass));
//! ```

pub mod kernel_isa;
pub mod runner;
pub mod suite;
