//! The interface every execution engine implements (this interpreter, later the JIT), so that
//! both pass the same tests and the interpreter can serve as the JIT's oracle.

use crate::error::VmError;
use crate::helpers::Helpers;
use crate::interp::{Interpreter, Options, PreparedProgram};
use crate::maps::InlineArray;
use crate::memory::Memory;
use bpfemu_isa::Program;

/// An execution engine: turns a program into something runnable, once.
pub trait Engine {
    /// A short name for reports ("interp", "jit").
    fn name(&self) -> &'static str;

    /// Prepares `prog` to run (the JIT compiles it here); run it as often as needed.
    fn prepare(&self, prog: &Program) -> Result<Box<dyn Executable>, VmError>;

    /// Prepares a program set, in which tail calls switch programs and callbacks run code of
    /// any program by its code address ([`crate::interp::code_addr`]), with run limits
    /// `options`.
    fn prepare_set(
        &self,
        progs: &[Program],
        options: Options,
    ) -> Result<Box<dyn Executable>, VmError>;

    /// Like [`Engine::prepare_set`], knowing the array maps behind map handles (`ld_imm64`
    /// constants) so that lookups in them may be inlined; the default ignores them.
    fn prepare_set_with_arrays(
        &self,
        progs: &[Program],
        options: Options,
        arrays: &[(u64, InlineArray)],
    ) -> Result<Box<dyn Executable>, VmError> {
        let _ = arrays;
        self.prepare_set(progs, options)
    }
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

    /// Runs program `entry` of a set prepared by [`Engine::prepare_set`], like
    /// [`Executable::run`].
    fn run_entry(
        &mut self,
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError>;

    /// Runs program `entry` `times` times (at least once) with the same arguments, on memory
    /// as each run leaves it, as BPF_PROG_TEST_RUN's `repeat` does: before every run after
    /// the first, [`Helpers::next_run`]. Stops at the first run that fails. Gives the last
    /// run's r0; [`Executable::executed`] then counts the instructions of all of them.
    fn run_entry_repeated(
        &mut self,
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
        times: u64,
    ) -> Result<u64, VmError> {
        let (result, total) = repeat_runs(times, helpers, |helpers| {
            let result = self.run_entry(entry, args, mem, helpers);
            (result, self.executed())
        });
        self.set_executed(total);
        result
    }

    /// How many instructions the last run executed.
    fn executed(&self) -> u64;

    /// Overrides [`Executable::executed`]'s answer (a repeated run's total).
    fn set_executed(&mut self, count: u64);

    /// Lets the engine leave the stack frames of a run live in its memory after the run, for
    /// the next run on the same memory to take back (zeroed where the last one wrote, as a
    /// parked frame brought back is), instead of parking them after every run: for a caller
    /// that runs one program set on one memory packet after packet. A frame live between runs
    /// is seen by nothing but address lookups, which only runs make; the caller parks the
    /// frames ([`Executable::release_frames`]) before anything else pushes a stack frame on
    /// that memory (another engine's run) or before the engine is dropped. An engine may
    /// ignore this.
    fn keep_frames(&mut self) {}

    /// Parks the frames [`Executable::keep_frames`] left live in `mem`, as after a run without
    /// it; keeping goes on from the next run.
    fn release_frames(&mut self, mem: &mut Memory) {
        let _ = mem;
    }
}

/// BPF_PROG_TEST_RUN's repeats over one engine's `run` (which gives its result and the
/// instructions it executed): `times` runs (at least one), [`Helpers::next_run`] before each
/// after the first, stopping at the first that fails. The last result, and the instructions
/// of all.
pub fn repeat_runs(
    times: u64,
    helpers: &mut dyn Helpers,
    mut run: impl FnMut(&mut dyn Helpers) -> (Result<u64, VmError>, u64),
) -> (Result<u64, VmError>, u64) {
    let mut total = 0;
    let mut result = Ok(0);
    for run_index in 0..times.max(1) {
        if run_index > 0 {
            helpers.next_run();
        }
        let executed;
        (result, executed) = run(helpers);
        total += executed;
        if result.is_err() {
            break;
        }
    }
    (result, total)
}

impl Engine for Interpreter {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn prepare(&self, prog: &Program) -> Result<Box<dyn Executable>, VmError> {
        self.prepare_set(std::slice::from_ref(prog), *self.options())
    }

    fn prepare_set(
        &self,
        progs: &[Program],
        options: Options,
    ) -> Result<Box<dyn Executable>, VmError> {
        Ok(Box::new(Interpreted {
            progs: progs.iter().cloned().map(PreparedProgram::new).collect(),
            interp: Interpreter::new(options),
            executed: None,
        }))
    }
}

/// A program the interpreter runs: decoding already happened when the [`Program`] was built.
struct Interpreted {
    progs: Vec<PreparedProgram>,
    interp: Interpreter,
    /// A repeated run's total, until the next run.
    executed: Option<u64>,
}

impl Executable for Interpreted {
    fn run(
        &mut self,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.executed = None;
        self.interp.run_prepared(&self.progs, 0, args, mem, helpers)
    }

    fn run_entry(
        &mut self,
        entry: usize,
        args: [u64; 5],
        mem: &mut Memory,
        helpers: &mut dyn Helpers,
    ) -> Result<u64, VmError> {
        self.executed = None;
        self.interp
            .run_prepared(&self.progs, entry, args, mem, helpers)
    }

    fn executed(&self) -> u64 {
        self.executed.unwrap_or_else(|| self.interp.executed())
    }

    fn set_executed(&mut self, count: u64) {
        self.executed = Some(count);
    }
}
