//! The one way in: how every command that runs a program (`replay`, `diff`, `bench`, `fuzz`)
//! opens an object, picks the program, verifies it and builds the runtime that runs it.
//!
//! The kernel runs nothing it has not verified, and bpfemu follows it: [`Prepared::admit`] is
//! the only gate between a loaded object and an engine. A command
//! 1. opens the object once ([`Prepared::open`]): the loader's work, and the program chosen by
//!    `--prog` (a function or a section name, as `ip link set ... sec S` names one) or the
//!    object's only XDP program;
//! 2. asks [`Prepared::admit`] whether an engine may run it: bpfemu's verifier judges what
//!    will run (the program, and every XDP program of the object when it makes tail calls or
//!    none was named), once however many engines ask; a rejection is refused unless
//!    `--no-verify`, and trusted engines, which reach host memory unchecked, run only what
//!    the verifier accepts, `--no-verify` or not;
//! 3. builds a runtime for the engine ([`Prepared::runtime`]): the loader-to-vm glue of
//!    [`crate::vm_runtime`], the CPUs, seed and FIB, the engine compiled with the stack bound
//!    the verifier found, the `--maps` contents.

use crate::mapio::MapIo;
use crate::verify::{ProgramVerdict, error_text, is_verified_type};
use anyhow::{Context, Result};
use bpfemu_isa::helpers::id;
use bpfemu_isa::{CallTarget, Insn};
use bpfemu_jit::Engine;
use bpfemu_loader::{Kernel, LoadOptions, Object, ProgramSpec};
use bpfemu_verifier::{Options, Verdict};
use bpfemu_vm::fib::Fib;
use bpfemu_vm::sockets::SocketTable;
use bpfemu_vm::xdp::{XdpConfig, XdpRuntime};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// An object opened for one of its programs, ready to be admitted and run.
pub struct Prepared {
    path: PathBuf,
    object: Object,
    load: LoadOptions,
    /// Index of the chosen program in `object.programs`.
    program: usize,
    /// Whether `--prog` named the program (else the object's only XDP program was taken).
    named: bool,
    /// The verdicts of what will run, computed the first time an engine asks.
    verdicts: OnceLock<Vec<(usize, Verdict)>>,
}

/// Why an object cannot be opened for a program.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The loader's error (it names the file).
    #[error(transparent)]
    Load(bpfemu_loader::LoadError),
    /// No program answers `--prog`, or none can be chosen without it.
    #[error("{path}: {why}")]
    Program { path: String, why: String },
}

/// Why an engine may not run the program: the verifier's message, placed at its source line.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct Refusal {
    /// The whole message, every line of it.
    pub text: String,
    /// What it means for the command's exit code.
    pub kind: RefusalKind,
}

/// The two ways a program is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// bpfemu's verifier rejects the program (the kernel would not load it): exit 1, as any
    /// finding about the program; `--no-verify` runs it in checked mode.
    Rejected,
    /// The engine asked for cannot run it (trusted code for a program the verifier does not
    /// accept, or one that reads kernel structures bpfemu does not emulate): exit 2, as a
    /// request bpfemu cannot carry out.
    EngineCannotRun,
}

impl Refusal {
    /// The command's exit code for this refusal.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            RefusalKind::Rejected => 1,
            RefusalKind::EngineCannotRun => 2,
        }
    }
}

/// How a runtime is set up for a run, besides the object.
#[derive(Clone, Debug, Default)]
pub struct RunSetup<'a> {
    pub engine: Engine,
    /// Virtual CPUs (at least one).
    pub cpus: u32,
    /// Seed of `bpf_get_prandom_u32`.
    pub seed: u64,
    /// The routing state `bpf_fib_lookup` sees.
    pub fib: Option<Fib>,
    /// The sockets `bpf_sk_lookup_tcp` and its kin find (`--sockets`).
    pub sockets: Option<SocketTable>,
    /// `--maps`: the maps' contents before the first packet.
    pub maps: Option<&'a Path>,
    /// `--no-verify`: run a program bpfemu's verifier rejects (checked engines only).
    pub no_verify: bool,
}

impl Prepared {
    /// Loads the object at `path` and picks its program: `program` by function or section
    /// name, or the object's only XDP program (iproute2's default section among several).
    pub fn open(
        path: &Path,
        program: Option<&str>,
        load: &LoadOptions,
    ) -> Result<Prepared, OpenError> {
        let object = bpfemu_loader::load_file(path, load).map_err(OpenError::Load)?;
        Prepared::from_object(path, object, program, load)
    }

    /// [`Prepared::open`] for an object already loaded from `path` with `load`.
    pub fn from_object(
        path: &Path,
        object: Object,
        program: Option<&str>,
        load: &LoadOptions,
    ) -> Result<Prepared, OpenError> {
        let index = pick_program(&object, program).map_err(|why| OpenError::Program {
            path: path.display().to_string(),
            why,
        })?;
        Ok(Prepared {
            path: path.to_path_buf(),
            object,
            load: load.clone(),
            program: index,
            named: program.is_some(),
            verdicts: OnceLock::new(),
        })
    }

    /// The object's path, as the user gave it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn object(&self) -> &Object {
        &self.object
    }

    /// The options the object was loaded with.
    pub fn load_options(&self) -> &LoadOptions {
        &self.load
    }

    /// The chosen program's index among the object's programs (the runtime's too).
    pub fn program_index(&self) -> usize {
        self.program
    }

    /// The chosen program.
    pub fn program(&self) -> &ProgramSpec {
        &self.object.programs[self.program]
    }

    /// The chosen program's (entry function's) name.
    pub fn program_name(&self) -> &str {
        &self.program().name
    }

    /// Whether `engine` may run the program: `Ok` with the stack bound trusted code needs
    /// (`None` for checked engines), or the refusal. Verifies at most once.
    pub fn admit(&self, engine: Engine, no_verify: bool) -> Result<Option<u32>, Refusal> {
        if no_verify && !engine.is_trusted() {
            return Ok(None);
        }
        let mut stack_bound = 0;
        for (index, verdict) in self.verdicts() {
            let spec = &self.object.programs[*index];
            if !no_verify && verdict.rejection().is_some() {
                return Err(self.rejected(spec, verdict));
            }
            if engine.is_trusted() {
                self.trusted_may_run(engine, spec, verdict)?;
                let deepest = verdict.stats.stack_depth.iter().copied().max();
                stack_bound = stack_bound.max(deepest.unwrap_or(0));
            }
        }
        Ok(engine.is_trusted().then_some(stack_bound))
    }

    /// A runtime for every program of the object, set up for a run and compiled for
    /// `setup.engine`, after [`Prepared::admit`] let it run the program.
    pub fn runtime(&self, setup: &RunSetup<'_>) -> Result<XdpRuntime> {
        Ok(self.runtime_timed(setup)?.0)
    }

    /// [`Prepared::runtime`], and how long the engine took to prepare the programs (the
    /// JIT's compile; zero for the interpreter, which decodes them as the runtime is built).
    pub fn runtime_timed(&self, setup: &RunSetup<'_>) -> Result<(XdpRuntime, Duration)> {
        let path = self.path.display();
        let stack_bound = self.admit(setup.engine, setup.no_verify)?;
        let config = XdpConfig {
            cpus: setup.cpus.max(1),
            seed: setup.seed,
            fib: setup.fib.clone(),
            sockets: setup.sockets.clone(),
            ..XdpConfig::default()
        };
        let mut runtime = crate::vm_runtime::build_runtime(&self.object, config)
            .with_context(|| format!("{path}: cannot prepare the program"))?;
        let compile_start = Instant::now();
        runtime
            .set_engine(&*setup.engine.build(stack_bound))
            .with_context(|| format!("{path}: cannot compile the program"))?;
        let compile_time = match setup.engine {
            Engine::Interp => Duration::ZERO,
            _ => compile_start.elapsed(),
        };
        runtime
            .runnable(self.program)
            .with_context(|| format!("{path}: cannot prepare the program"))?;
        if let Some(file) = setup.maps {
            MapIo::new(&self.object, &mut runtime).load_file(file)?;
        }
        Ok((runtime, compile_time))
    }

    /// The verdicts of the XDP programs that run, by program index: the chosen one, and all
    /// of them when it makes tail calls (a prog array may hold any) or when none was named
    /// (as a loader loads every program of the object). What [`Prepared::admit`] judges by.
    pub fn verdicts(&self) -> &[(usize, Verdict)] {
        self.verdicts.get_or_init(|| {
            let chosen = self.program();
            let every = !self.named || makes_tail_calls(chosen);
            let judge = crate::verify::ObjectJudge::new(&self.object);
            self.object
                .programs
                .iter()
                .enumerate()
                .filter(|(i, p)| *i == self.program || (every && is_verified_type(p)))
                .map(|(i, p)| (i, judge.judge(p, &Options::default())))
                .collect()
        })
    }

    fn rejected(&self, program: &ProgramSpec, verdict: &Verdict) -> Refusal {
        let object = self.path.display().to_string();
        Refusal {
            text: format!(
                "{}bpfemu: {object}: the verifier rejects program {} (--no-verify runs it \
                 unverified, in checked mode)",
                placed_error(&object, &self.object.kernel, program, verdict),
                program.name
            ),
            kind: RefusalKind::Rejected,
        }
    }

    /// Trusted code reaches host memory unchecked: only what the verifier accepts, and
    /// nothing that reads kernel structures bpfemu does not lay out as the kernel does.
    fn trusted_may_run(
        &self,
        engine: Engine,
        program: &ProgramSpec,
        verdict: &Verdict,
    ) -> Result<(), Refusal> {
        let object = self.path.display().to_string();
        let name = engine.name();
        let text = if let Some(flaw) = verdict.kernel_flaw() {
            format!(
                "{object}: program {} was accepted, as {} accepts it, with {}: --engine {name} \
                 cannot run it; run it with --engine jit (every access checked)",
                program.name,
                self.object.kernel.version(),
                flaw.describe()
            )
        } else if verdict.reads_kernel_memory() {
            format!(
                "{object}: program {} reads kernel structures (a map's internals) that bpfemu \
                 does not emulate: --engine {name} cannot run it; run it with --engine jit \
                 (every access checked)",
                program.name
            )
        } else if !verdict.is_accepted() {
            format!(
                "{}--engine {name} runs only what bpfemu's verifier accepts, and it rejects \
                 program {}: run it with --engine jit (every access checked)",
                placed_error(&object, &self.object.kernel, program, verdict),
                program.name
            )
        } else {
            return Ok(());
        };
        Err(Refusal {
            text,
            kind: RefusalKind::EngineCannotRun,
        })
    }
}

/// The verifier's rejection as `bpfemu verify` prints it (`file.c:LINE:COL: error: ...`).
fn placed_error(object: &str, kernel: &Kernel, program: &ProgramSpec, verdict: &Verdict) -> String {
    error_text(
        object,
        &ProgramVerdict {
            program,
            verdict: verdict.clone(),
            kernel,
            explanation: None,
        },
    )
}

/// Whether the program calls `bpf_tail_call` (an undecodable one counts as calling it).
fn makes_tail_calls(spec: &ProgramSpec) -> bool {
    let mut pc = 0;
    while pc < spec.insns.len() {
        match Insn::decode(&spec.insns, pc) {
            Ok((Insn::Call(CallTarget::Helper(id::TAIL_CALL)), _)) => return true,
            Ok((_, slots)) => pc += slots.max(1),
            Err(_) => return true,
        }
    }
    false
}

/// The program to run, by index: the one named (by function name first, then by section
/// name), or the object's only XDP program (iproute2's default section among several).
fn pick_program(object: &Object, wanted: Option<&str>) -> Result<usize, String> {
    let index_of = |p: &ProgramSpec| object.programs.iter().position(|q| std::ptr::eq(p, q));
    let xdp: Vec<&str> = object
        .programs
        .iter()
        .filter(|p| is_verified_type(p))
        .map(|p| p.name.as_str())
        .collect();
    if let Some(name) = wanted {
        // A section of several programs names none of them: running the first would run a
        // program the user may not have meant (`verify --prog SECTION` checks them all).
        let in_section: Vec<&str> = object
            .programs
            .iter()
            .filter(|p| p.section == name)
            .map(|p| p.name.as_str())
            .collect();
        if in_section.len() > 1 && !object.programs.iter().any(|p| p.name == name) {
            return Err(format!(
                "section `{name}` holds several programs ({}); choose one with --prog FUNCTION",
                in_section.join(", ")
            ));
        }
        let Some(p) = object.find_program(name) else {
            let all: Vec<&str> = object.programs.iter().map(|p| p.name.as_str()).collect();
            return Err(format!("no program `{name}`; it has {}", all.join(", ")));
        };
        if !is_verified_type(p) {
            return Err(format!(
                "program `{name}` (section {}) is not an XDP program",
                p.section
            ));
        }
        return index_of(p).ok_or_else(|| format!("no program `{name}`"));
    }
    let chosen = match xdp.as_slice() {
        [only] => *only,
        [] => return Err("no XDP program in this object".to_owned()),
        several => match object.iproute2_default(several) {
            Some(default) => default,
            None => {
                return Err(format!(
                    "several XDP programs ({}); choose one with --prog (the first is `{}`)",
                    xdp.join(", "),
                    several[0]
                ));
            }
        },
    };
    object
        .programs
        .iter()
        .position(|p| p.name == chosen)
        .ok_or_else(|| format!("no program `{chosen}`"))
}
