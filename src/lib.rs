//! bpfemu
