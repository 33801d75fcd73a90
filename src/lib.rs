//! bpfemu: the Linux kernel's eBPF machinery for XDP, rebuilt in userspace Rust.
//!
//! This facade re-exports the workspace's product crates; the `bpfemu` binary is the command
//! line over them. `ARCHITECTURE.md` at the repository's root has the layout and the data flow.
//!
//! - [`isa`]: instructions, decoding, the kernel-syntax disassembler and the assembler.
//! - [`vm`]: checked memory and the reference interpreter.
//! - [`loader`]: the BPF ELF objects clang builds, prepared as libbpf 1.7 prepares them.
//! - [`verifier`]: the Linux 6.18 verifier for XDP programs: the kernel's verdict and log.
//! - [`jit`]: the two JIT tiers (Cranelift, x86-64 baseline) and [`jit::Engine`], the one list
//!   of engines every command chooses from.
//! - [`kernel`]: the one door to the running kernel (bpf(), maps, programs, test runs, event
//!   rings, network namespaces), behind `diff`, `bench` and `conformance --kernel`.
//!
//! The judges that check all this (the libbpf oracle, the fuzz target bodies, the upstream
//! conformance plugin) are the `bpfemu-conformance` crate, which the product does not depend
//! on.

pub use bpfemu_isa as isa;
pub use bpfemu_jit as jit;
pub use bpfemu_kernel as kernel;
pub use bpfemu_loader as loader;
pub use bpfemu_verifier as verifier;
pub use bpfemu_vm as vm;

pub mod bench;
pub mod conformance;
pub mod diff;
pub mod digest;
pub mod disasm;
pub mod errors;
pub mod expect;
pub mod explain;
pub mod html_report;
pub mod junit;
pub mod kernels;
pub mod layers;
pub mod load_args;
pub mod mapio;
pub mod packet_fuzz;
pub mod pcap;
pub mod prepare;
pub mod progress;
pub mod record_types;
pub mod replay;
pub mod rss;
pub mod run;
pub mod testfile;
pub mod traffic;
pub mod verify;
pub mod vm_runtime;
