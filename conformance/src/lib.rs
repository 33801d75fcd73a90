//! bpfemu's judges: the bpf_conformance ISA suite and the running kernel.

pub mod kernel;
