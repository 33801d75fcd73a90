//! bpfemu: the Linux kernel's eBPF machinery for XDP, rebuilt in userspace Rust.
//!
//! This facade re-exports the workspace's crates; the `bpfemu` binary is the command line
//! over them. See `DESIGN.md` in the shared folder for the layout and the data flow.
//!
//! - [`isa`]: instructions, decoding, the kernel-syntax disassembler and the assembler.
//! - [`vm`]: checked memory and the reference interpreter.
//! - [`jit`]: the Cranelift JIT, the same results as the interpreter at native speed.
//! - [`conformance`]: the bpf_conformance suite runner and the kernel oracle.

pub use bpfemu_conformance as conformance;
pub use bpfemu_isa as isa;
pub use bpfemu_jit as jit;
pub use bpfemu_vm as vm;

pub mod bench;
pub mod diff;
pub mod digest;
pub mod expect;
pub mod fuzz;
pub mod fuzzing;
pub mod mapio;
pub mod pcap;
pub mod prepare;
pub mod progress;
pub mod record_types;
pub mod replay;
pub mod rss;
pub mod traffic;
pub mod verify;
pub mod vm_runtime;
