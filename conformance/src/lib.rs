//! bpfemu's judges: what checks the product, never part of it.
//!
//! - [`plugin`] is the upstream bpf_conformance plugin protocol (the
//!   `bpfemu-conformance-plugin` binary), so the upstream runner can measure bpfemu; the suite
//!   itself, and running it through the kernel, are the product's `bpfemu::conformance` (the
//!   `bpfemu conformance` command).
//! - `libbpf` (feature `libbpf`, for tests only): libbpf 1.7 as the independent judge of the
//!   loader; it needs libelf and zlib to build, which the product does not.
//! - [`fuzz_targets`]: the bodies of the libFuzzer targets in `fuzz/`, which the regression
//!   test over the committed corpus (`tests/fuzz_regressions.rs`) runs as well.
//!
//! The kernel itself is reached through `bpfemu_kernel`, the product's one door to it; the
//! tests judge bpfemu against the kernel through that crate and through libbpf.

pub mod fuzz_targets;
#[cfg(feature = "libbpf")]
pub mod libbpf;
pub mod plugin;
