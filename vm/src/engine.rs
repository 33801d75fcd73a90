//! The interface every execution engine implements (this interpreter, later the JIT), so that
//! both pass the same tests and the interpreter can serve as the JIT's oracle.

use crate::error::VmError;
use crate::helpers::Helpers;
use crate::interp::Interpreter;
use crate::memory::Memory;
use bpfemu_isa::Program;

/// An execution engine: turns a program into something runnable, once.
pub trait Engine {
    /// A short name for reports ("interp", "jit").
    fn name(&self) -> &'static str;

    /// Prepares `prog` to run (the JIT compiles it here); run it as often as needed.
    fn prepare(&self, prog: &Program) -> Result<Box<dyn Executable>, VmError>;
}

/// A prepared program.
pub trait Executable {
    /// Runs from the first instruction with r1-r5 = `args`; returns r0 at the final exit.
    fn run(
        &mut self,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError>;
}

impl Engine for Interpreter {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn prepare(&self, prog: &Program) -> Result<Box<dyn Executable>, VmError> {
        Ok(Box::new(Interpreted {
            prog: prog.clone(),
            interp: Interpreter::new(*self.options()),
        }))
    }
}

/// A program the interpreter runs: decoding already happened when the [`Program`] was built.
struct Interpreted {
    prog: Program,
    interp: Interpreter,
}

impl Executable for Interpreted {
    fn run(
        &mut self,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.interp.run(&self.prog, args, mem, helpers)
    }
}
