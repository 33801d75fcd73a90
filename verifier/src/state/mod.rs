//! The verifier's view of one path: registers, tnums, bounds, stack slots, frames and
//! references.

pub mod bounds;
pub mod frame;
pub mod reg;
pub mod stack;
pub mod tnum;
pub mod width;

pub use frame::{FuncState, RefKind, RefState, VerifierState};
pub use reg::{RegState, RegType};
pub use stack::{SlotType, StackSlot};
pub use tnum::Tnum;
