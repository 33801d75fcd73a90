//! Progress of the long commands (replay, diff, bench, fuzz, conformance) on standard error:
//! what is done, its rate, and the share of the whole (of the capture file read, of the
//! packets, runs or files asked for), drawn with indicatif.
//!
//! Only on a terminal: when standard error is a pipe or a file (CI logs) nothing is drawn,
//! and nothing ever goes to standard output. Drawing is steady and cheap: a caller reports
//! every item, but the clock is read once per [`Progress::new`]'s `check_every` items and
//! the bar redrawn at most ten times a second. The last frame (100%, the totals) is drawn and
//! then cleared, so that the terminal holds only the command's own output afterwards.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the bar is redrawn.
const REDRAW: Duration = Duration::from_millis(100);

/// A progress bar, or nothing when standard error is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// What the items are called in the message ("packets", "runs", "files").
    unit: &'static str,
    /// A power of two minus one: the clock is read when `done & check_mask == 0`.
    check_mask: u64,
    started: Instant,
    next_draw: Instant,
}

impl Progress {
    /// A bar labelled `label` over a whole of `total` (in the units `position` is given in at
    /// each [`Progress::tick`]), or a spinner when the whole is unknown. `check_every` is
    /// rounded up to a power of two. Drawn only when `wanted` and standard error is a
    /// terminal.
    pub fn new(
        wanted: bool,
        label: &str,
        unit: &'static str,
        total: Option<u64>,
        check_every: u64,
    ) -> Progress {
        let started = Instant::now();
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let template = if total.is_some() {
                "{spinner} {prefix} [{bar:30}] {percent:>3}% {wide_msg}"
            } else {
                "{spinner} {prefix} {wide_msg}"
            };
            let style = ProgressStyle::with_template(template)
                .expect("the template is valid")
                .progress_chars("=> ");
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr_with_hz(10))
                .with_style(style)
                .with_prefix(label.to_owned())
                .with_message(format!("0 {unit}"));
            // The spinner turns even while one item takes long (a kernel run, a slow file).
            bar.enable_steady_tick(REDRAW);
            bar
        });
        Progress {
            bar,
            unit,
            check_mask: check_every.max(1).next_power_of_two() - 1,
            started,
            next_draw: started,
        }
    }

    /// A replay of a capture: the share is of the file's bytes (unknown for standard input).
    /// `check_every` as for [`Progress::new`]: many for a fast replay, few for a slow one.
    pub fn capture(wanted: bool, capture: &Path, check_every: u64) -> Progress {
        let size = std::fs::metadata(capture)
            .ok()
            .filter(|m| m.is_file() && m.len() > 0)
            .map(|m| m.len());
        let label = capture.file_name().map_or_else(
            || capture.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Progress::new(wanted, &label, "packets", size, check_every)
    }

    /// `done` items so far; `position` (called only when the bar is redrawn) says where in
    /// the whole they are.
    #[inline]
    pub fn tick(&mut self, done: u64, position: impl FnOnce() -> u64) {
        self.tick_noting(done, position, String::new);
    }

    /// As [`Progress::tick`], with a note after the rate (made only when the bar is redrawn).
    #[inline]
    pub fn tick_noting(
        &mut self,
        done: u64,
        position: impl FnOnce() -> u64,
        note: impl FnOnce() -> String,
    ) {
        if self.bar.is_none() || done & self.check_mask != 0 {
            return;
        }
        let now = Instant::now();
        if now < self.next_draw {
            return;
        }
        self.next_draw = now + REDRAW;
        self.draw(done, position(), &note());
    }

    fn draw(&self, done: u64, position: u64, note: &str) {
        if let Some(bar) = &self.bar {
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            let rate = human(done as f64 / secs);
            let sep = if note.is_empty() { "" } else { ", " };
            bar.set_position(position);
            bar.set_message(format!("{done} {}, {rate}/s{sep}{note}", self.unit));
        }
    }

    /// Runs `f` (which writes to the terminal) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Draws the last frame (all of the whole, when known) and clears it.
    pub fn finish(&self, done: u64) {
        if let Some(bar) = &self.bar {
            self.draw(done, bar.length().unwrap_or(0), "");
            bar.force_draw();
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// A command that stops on an error leaves no bar behind.
    fn drop(&mut self) {
        if let Some(bar) = &self.bar
            && !bar.is_finished()
        {
            bar.finish_and_clear();
        }
    }
}

/// A rate in a few digits: 950, 12.3k, 4.56M.
fn human(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1}k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_short() {
        assert_eq!(human(950.2), "950");
        assert_eq!(human(12_345.0), "12.3k");
        assert_eq!(human(4_560_000.0), "4.56M");
    }

    #[test]
    fn nothing_is_drawn_when_not_wanted() {
        let mut progress = Progress::new(false, "x", "runs", Some(10), 1);
        let mut asked = false;
        progress.tick(0, || {
            asked = true;
            0
        });
        assert!(!asked, "the position is asked only for a drawn bar");
        assert_eq!(progress.check_mask, 0);
        assert_eq!(
            Progress::new(false, "x", "runs", None, 1000).check_mask,
            1023
        );
    }
}
