//! The comparison of two verdicts and the closing figures of a run.

use super::kernel_side::Judgement;
use std::collections::BTreeMap;

/// How a program's verdicts compare.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub compared: usize,
    pub kernel_accepted: usize,
    pub verdict_equal: usize,
    pub rejected_by_both: usize,
    pub message_equal: usize,
    pub processed_compared: usize,
    pub processed_equal: usize,
    /// name -> what differs (verdict or message).
    pub differing: BTreeMap<String, String>,
    /// Lines of the table (name, kernel, bpfemu).
    pub rows: Vec<String>,
    /// Programs whose processed-instruction counts differ: `name (kernel N, bpfemu M)`.
    pub count_differing: Vec<String>,
}

impl Tally {
    /// Records one program; returns whether verdict and message agree.
    pub fn record(&mut self, name: &str, kernel: &Judgement, ours: &Judgement) -> bool {
        self.compared += 1;
        self.kernel_accepted += usize::from(kernel.accepted);
        let verdict_equal = kernel.accepted == ours.accepted;
        let mut agree = verdict_equal;
        if verdict_equal {
            self.verdict_equal += 1;
            if !kernel.accepted {
                self.rejected_by_both += 1;
                if kernel.message == ours.message {
                    self.message_equal += 1;
                } else {
                    agree = false;
                }
            }
        }
        if let (Some(k), Some(o)) = (kernel.processed, ours.processed) {
            self.processed_compared += 1;
            if k == o {
                self.processed_equal += 1;
            } else {
                self.count_differing
                    .push(format!("{name} (kernel {k}, bpfemu {o})"));
            }
        }
        let count = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        self.rows.push(format!(
            "{name:<64} {:>7} {:>7}  {}",
            count(kernel.processed),
            count(ours.processed),
            if agree {
                "same".to_owned()
            } else {
                "DIFF".to_owned()
            }
        ));
        if !agree {
            self.differing.insert(
                name.to_owned(),
                format!("kernel {} | bpfemu {}", kernel.summary(), ours.summary()),
            );
        }
        agree
    }

    /// The closing figures.
    pub fn summary(&self, what: &str) -> String {
        let share = |n: usize, d: usize| {
            if d == 0 {
                "-".to_owned()
            } else {
                format!("{:.1}%", 100.0 * n as f64 / d as f64)
            }
        };
        format!(
            "{what}: {} programs; verdict equal {}/{} ({}); message equal {}/{} rejected by both ({}); \
             processed-insn count equal {}/{} ({})",
            self.compared,
            self.verdict_equal,
            self.compared,
            share(self.verdict_equal, self.compared),
            self.message_equal,
            self.rejected_by_both,
            share(self.message_equal, self.rejected_by_both),
            self.processed_equal,
            self.processed_compared,
            share(self.processed_equal, self.processed_compared),
        )
    }
}
