//! The depth-first walk (`do_check`): one instruction at a time on the current path, the other
//! edge of each branch pushed for later, checkpoints at prune points, the limits.

use crate::env::Env;
use crate::log::Log;
use crate::{Errno, Options, Outcome, ProgramInput, Rejection, Stats, Verdict, check, fixup};
use bpfemu_isa::Program;
use std::time::Instant;

/// Verifies `input`; see [`crate::verify`].
pub fn run(input: &ProgramInput<'_>, opts: &Options) -> Verdict {
    let started = Instant::now();
    let mut log = Log::new(opts.log_level);
    let Some(ops) = crate::prog_type::ops_for(input.prog_type) else {
        let msg = format!("not yet supported: program type {}", input.prog_type);
        return rejected(log, msg, None, Errno::Einval, started);
    };
    // The kernel checks raw slots before it explores (check.rs); slots only the walk may
    // refuse are decoded as placeholders that carry the kernel's message.
    let pre = match check::precheck(input, &mut log) {
        Ok(pre) => pre,
        Err(r) => return rejected(log, r.msg, None, r.errno, started),
    };
    let prog = match Program::decode(pre.sanitized.clone()) {
        Ok(p) => p,
        Err(e) => {
            log.verbose(&format!("{e}\n"));
            return rejected(log, e.to_string(), None, Errno::Einval, started);
        }
    };
    let mut env = Env::new(input, prog, ops, log);
    if let Err(r) = check::check_program(&mut env, &pre) {
        return rejected(env.log, r.msg, None, r.errno, started);
    }
    let msg = "not yet supported: exploration".to_string();
    env.log.verbose(&format!("{msg}\n"));
    let _ = fixup::xlate;
    rejected(env.log, msg, Some(0), Errno::Einval, started)
}

fn rejected(
    log: Log,
    message: String,
    insn: Option<usize>,
    errno: Errno,
    started: Instant,
) -> Verdict {
    Verdict {
        outcome: Outcome::Rejected(Rejection {
            message,
            insn,
            source: None,
            errno,
        }),
        log: log.text,
        stats: Stats {
            time: started.elapsed(),
            ..Stats::default()
        },
    }
}
