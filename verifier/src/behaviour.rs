//! Behaviour switches: where the verifier's code (not its tables) differs between the kernels
//! bpfemu answers as, and so processed counts differ. Each switch is one question about the
//! kernel, answered from the version where the kernel changed; the walk asks it at the one
//! place the behaviour lives, so there is a single verifier.

use bpfemu_isa::KernelVersion;

/// An array lookup by a constant key in range returns a `map_value` that is never NULL, so
/// the program's NULL check has one side only (`can_elide_value_nullness`, from "bpf:
/// verifier: Support eliding map lookup nullness", Linux 6.14). Before, the lookup returns
/// `map_value_or_null` and both sides of the check are walked.
pub fn elides_array_lookup_nullness(kernel: KernelVersion) -> bool {
    kernel > KernelVersion::V6_12
}
