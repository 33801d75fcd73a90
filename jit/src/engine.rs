//! Which engine runs a program: the one list the command line (`--engine`), the conformance
//! runner and the benches choose from.

use crate::{Jit, Mode};

/// An engine that runs programs: the reference interpreter or one of the JIT tiers, each in
/// checked mode (every access validated as the interpreter validates it) or trusted mode
/// (host memory reached directly, for verified programs only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Engine {
    /// The reference interpreter (checked memory).
    #[default]
    Interp,
    /// The Cranelift JIT, every memory access checked as the interpreter checks it.
    Jit,
    /// The Cranelift JIT on host memory, for verified programs only: bpfemu's verifier must
    /// accept the program first (and every program of the object when it makes tail calls).
    JitTrusted,
    /// The baseline JIT on host memory, for verified programs only (as jit-trusted): x86-64
    /// code made straight from each instruction, compiled much faster than Cranelift's.
    JitBaseline,
    /// The baseline JIT, every memory access checked as the interpreter checks it (as jit),
    /// compiled as fast as jit-baseline.
    JitBaselineChecked,
}

impl Engine {
    /// Every engine, in the order reports list them.
    pub const ALL: [Engine; 5] = [
        Engine::Interp,
        Engine::Jit,
        Engine::JitTrusted,
        Engine::JitBaseline,
        Engine::JitBaselineChecked,
    ];

    /// The engine's name, as `--engine` takes it and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Interp => "interp",
            Engine::Jit => "jit",
            Engine::JitTrusted => "jit-trusted",
            Engine::JitBaseline => "jit-baseline",
            Engine::JitBaselineChecked => "jit-baseline-checked",
        }
    }

    /// Whether the engine reaches host memory unchecked: it may run only what bpfemu's
    /// verifier accepts.
    pub fn is_trusted(self) -> bool {
        matches!(self, Engine::JitTrusted | Engine::JitBaseline)
    }

    /// The engine as the vm runs it. `stack_bound` is the verifier's stack depth for trusted
    /// code, which then zeroes a returning frame only where it can have written; checked
    /// engines ignore it.
    pub fn build(self, stack_bound: Option<u32>) -> Box<dyn bpfemu_vm::Engine> {
        let jit = match self {
            Engine::Interp => return Box::new(bpfemu_vm::Interpreter::default()),
            Engine::Jit => Jit::new(Mode::Checked),
            Engine::JitTrusted => Jit::new(Mode::Trusted),
            Engine::JitBaseline => Jit::new(Mode::Trusted).baseline(),
            Engine::JitBaselineChecked => Jit::new(Mode::Checked).baseline(),
        };
        match stack_bound {
            Some(bytes) if self.is_trusted() => Box::new(jit.with_stack_bound(bytes)),
            _ => Box::new(jit),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;

    fn from_str(text: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
                format!("unknown engine '{text}' (one of {})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for engine in Engine::ALL {
            assert_eq!(engine.name().parse::<Engine>(), Ok(engine));
            assert!(!engine.build(None).name().is_empty());
        }
        let err = "jit-fast".parse::<Engine>().unwrap_err();
        assert!(err.contains("unknown engine 'jit-fast'"), "{err}");
    }

    #[test]
    fn only_the_unchecked_tiers_are_trusted() {
        let trusted: Vec<Engine> = Engine::ALL.into_iter().filter(|e| e.is_trusted()).collect();
        assert_eq!(trusted, [Engine::JitTrusted, Engine::JitBaseline]);
    }
}
