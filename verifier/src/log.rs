//! The verifier log in the kernel's format (`kernel/bpf/log.c`): instruction lines
//! `N: (op) text`, register and stack states (`R1=pkt(r=14)`, `fp-8=mmmm????`), `; source`
//! lines from BTF line_info, error lines and the closing statistics.

use crate::env::Env;
use crate::state::reg::{RegState, RegType, reg_type_str};

/// `BPF_LOG_LEVEL1`: errors, branch states, the closing line.
pub const LEVEL1: u32 = 1;
/// `BPF_LOG_LEVEL2`: every instruction and state.
pub const LEVEL2: u32 = 2;
/// `BPF_LOG_STATS`: the statistics lines.
pub const STATS: u32 = 4;

/// The log being written.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// The `log_level` bits.
    pub level: u32,
    pub text: String,
}

impl Log {
    pub fn new(level: u32) -> Log {
        Log {
            level,
            text: String::new(),
        }
    }

    /// Whether anything is logged (`bpf_verifier_log_needed`).
    pub fn enabled(&self) -> bool {
        self.level != 0
    }

    /// Whether level-2 (per instruction) lines are logged.
    pub fn level2(&self) -> bool {
        self.level & LEVEL2 != 0
    }

    /// The kernel's `verbose()`: text appended whenever a log is kept.
    pub fn verbose(&mut self, text: &str) {
        if self.level & (LEVEL1 | LEVEL2) != 0 {
            self.text.push_str(text);
        }
    }
}

/// The kernel's text for one register's state, after `R1=` (`print_reg_state`).
pub fn reg_state_text(_env: &Env<'_>, reg: &RegState) -> String {
    match reg.ty {
        RegType::NotInit => "?".to_string(),
        RegType::Scalar if reg.var_off.is_const() => format!("{}", reg.var_off.value as i64),
        _ => reg_type_str(reg.ty, reg.flags),
    }
}
