//! The environment through which a running program reaches helper functions.

use crate::memory::{MemFault, Memory};

/// Helper functions, as the runtime sees them: `call` receives the helper id, r1-r5 and the
/// run's memory, and returns the value for r0.
///
/// The interpreter leaves r1-r5 unchanged after a helper call (the kernel's verifier makes them
/// unreadable, so a verified program cannot tell).
pub trait Helpers {
    fn call(&mut self, id: i32, args: [u64; 5], mem: &mut Memory) -> Result<u64, HelperError>;
}

/// Why a helper call failed. The runtime adds the pc and helper id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelperError {
    /// The environment has no helper with this id.
    #[error("unknown helper {0}")]
    Unknown(i32),
    /// The helper was handed memory the program does not own.
    #[error(transparent)]
    Memory(#[from] MemFault),
    /// Any other failure, described for the user.
    #[error("{0}")]
    Failed(String),
}

/// An environment without helpers: every call is [`HelperError::Unknown`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHelpers;

impl Helpers for NoHelpers {
    fn call(&mut self, id: i32, _args: [u64; 5], _mem: &mut Memory) -> Result<u64, HelperError> {
        Err(HelperError::Unknown(id))
    }
}
