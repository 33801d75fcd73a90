//! Shared by the verifier's tests against the kernel: the probe format, the kernel's verdict,
//! bpfemu's verdict, the list of known differences, and the comparison report.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod bpfemu_side;
pub mod kernel_side;
pub mod known;
pub mod probe;
pub mod report;
pub mod soundness;
