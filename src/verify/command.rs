//! `bpfemu verify`'s options and its run: objects judged, then the reports asked for.

use super::batch::{self, Batch};
use super::{ci, compare, matrix, sarif, table};
use crate::load_args::LoadArgs;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The report on standard output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Errors placed as compilers place them, the log asked for, a table, a summary line.
    Text,
    /// One JSON document.
    Json,
    /// veristat's CSV (its column names and verdict words), every statistic.
    Csv,
    /// SARIF 2.1.0, for code-scanning viewers.
    Sarif,
}

/// `bpfemu verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// BPF objects, or directories searched (recursively) for the `.o` files that are BPF
    /// objects.
    #[arg(value_name = "OBJ", required_unless_present = "compare")]
    pub objects: Vec<PathBuf>,
    /// Only this program (a function name, or a section name: every program of it).
    #[arg(long)]
    pub prog: Option<String>,
    /// The verifier log to print: 0 none, 1 the path to the error, 2 every state.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2))]
    pub log_level: u32,
    /// The report on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The same as `--format json`.
    #[arg(long, conflicts_with_all = ["csv", "format"])]
    pub json: bool,
    /// The same as `--format csv`.
    #[arg(long, conflicts_with = "format")]
    pub csv: bool,
    /// Compare two CSV files (bpfemu's `--csv` or veristat's `-o csv`), verifying nothing:
    /// per program both values and the change; exit 1 when a `--fail-on` rule is broken.
    #[arg(long, num_args = 2, value_names = ["BASE.csv", "NEW.csv"],
          conflicts_with_all = ["objects", "baseline", "sarif", "junit", "csv"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Compare this run with a CSV written before (bpfemu's or veristat's).
    #[arg(long, value_name = "BASE.csv")]
    pub baseline: Option<PathBuf>,
    /// When a comparison fails: `verdict` (a verdict changed; the default), `programs` (one
    /// appeared or went), or `STAT>+N%`, `STAT>+N`, `STAT>N` with STAT a veristat
    /// statistic (insns, states, peak_states, duration, stack_depth, ...); repeat or
    /// separate with commas. Given, it replaces the default.
    #[arg(long, value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Also write a SARIF 2.1.0 file (one result per rejected program at its source line).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Also write a JUnit XML file (one test case per program).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// For each rejection, the path from the entry to the error: the instructions that
    /// touched what failed, with the registers as each left them (JSON: `explanation.path`).
    #[arg(long)]
    pub explain: bool,
    /// Also write a self-contained HTML page of what the verifier did (source lines,
    /// instructions, states, the path to the error, loops and pruning): to FILE for one
    /// object, one page per object and an index in DIR/ for several.
    #[arg(long, value_name = "FILE|DIR/")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub load: LoadArgs,
}

impl VerifyArgs {
    fn format(&self) -> Format {
        match (self.json, self.csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => self.format,
        }
    }
}

/// What a run ends with: the exit code, and a write error (a closed pipe) if the report could
/// not all be written.
pub struct Ending {
    pub code: u8,
    pub written: Result<()>,
}

/// Runs `bpfemu verify`: exit 0 when every program is accepted (and no threshold crossed),
/// 1 when one is rejected or a `--fail-on` rule is broken, 2 when an object cannot be read,
/// a program is undecided, or nothing was judged.
pub fn run(args: &VerifyArgs) -> Result<Ending> {
    let rules = match args.fail_on.is_empty() {
        true => compare::default_rules(),
        false => compare::parse_rules(&args.fail_on)?,
    };
    if let Some(files) = &args.compare {
        return compare_files(&files[0], &files[1], &rules, args.format());
    }
    if args.load.kernels().len() > 1 {
        return run_matrix(args);
    }
    let baseline = args
        .baseline
        .as_deref()
        .map(|path| table::read_csv(path).map_err(|e| anyhow::anyhow!("--baseline {e}")))
        .transpose()?;
    let format = args.format();
    let mut out = std::io::stdout().lock();
    let mut closed: Option<std::io::Error> = None;
    let stream_text = format == Format::Text;
    let many = args.objects.len() > 1 || args.objects.iter().any(|p| p.is_dir());
    let mut html = args
        .html
        .as_deref()
        .map(|dest| crate::html_report::HtmlWriter::new(dest, many))
        .transpose()?;
    let mut visit = |name: &str, object: &bpfemu_loader::Object, report: &super::Report<'_>| {
        match html.as_mut() {
            Some(html) => html.add(&crate::html_report::ObjectReport {
                name,
                object,
                report,
            }),
            None => Ok(()),
        }
    };
    let batch = batch::verify_paths(
        &args.objects,
        args.prog.as_deref(),
        args.log_level,
        args.explain,
        true,
        &args.load.options(),
        &mut visit,
        |batch, from| {
            if !stream_text || closed.is_some() {
                return;
            }
            for p in &batch.programs[from..] {
                if let Err(e) = out.write_all(p.text.as_bytes()) {
                    closed = Some(e);
                    return;
                }
            }
        },
    )?;
    for failure in &batch.failures {
        let _ = writeln!(std::io::stderr(), "bpfemu: {}", failure.error);
    }
    if batch.programs.is_empty() && !batch.not_verified.is_empty() {
        let what = match args.objects.as_slice() {
            [one] => one.display().to_string(),
            _ => "the objects given".to_owned(),
        };
        let _ = writeln!(
            std::io::stderr(),
            "bpfemu: {what}: no XDP program to verify (bpfemu's verifier judges XDP programs)"
        );
    }
    let comparison_rows = batch.rows();
    let comparison = baseline
        .as_ref()
        .map(|base| compare::compare(base, &comparison_rows, &rules));
    let mut code = batch.exit_code();
    if comparison.as_ref().is_some_and(|c| !c.failures.is_empty()) && code != 1 {
        code = 1;
    }
    write_files(args, &batch)?;
    if let Some(html) = html.filter(|_| !batch.objects.is_empty()) {
        html.finish()?;
    }
    let written = match closed {
        Some(e) => Err(e.into()),
        None => report(
            &mut out,
            &args.load.kernels()[0],
            &batch,
            comparison.as_ref(),
            format,
        ),
    };
    Ok(Ending { code, written })
}

fn write_files(args: &VerifyArgs, batch: &Batch) -> Result<()> {
    if let Some(path) = &args.sarif {
        let doc = serde_json::to_string_pretty(&sarif::render(batch))?;
        write_file(path, &doc)?;
    }
    if let Some(path) = &args.junit {
        write_file(path, &crate::junit::render(&ci::junit_suites(batch)))?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The report on standard output, after the programs' own text (streamed as judged).
fn report(
    out: &mut impl Write,
    kernel: &bpfemu_loader::Kernel,
    batch: &Batch,
    comparison: Option<&compare::Comparison<'_>>,
    format: Format,
) -> Result<()> {
    let annotations = ci::in_github_actions().then(|| ci::github_annotations(batch));
    match format {
        Format::Text => {
            let rows = batch.rows();
            if !rows.is_empty() {
                write!(out, "{}", table::render_table(&rows))?;
            }
            for n in &batch.not_verified {
                writeln!(out, "{}: {} ({}): {}", n.file, n.name, n.section, n.reason)?;
            }
            if let Some(cmp) = comparison {
                write!(out, "{}", compare::render(cmp))?;
            }
            writeln!(out, "kernel {}: {}", kernel.describe(), batch.summary())?;
            // Workflow commands go where the text goes: the step's log.
            for line in annotations.iter().flatten() {
                writeln!(out, "{line}")?;
            }
            return Ok(());
        }
        Format::Json => {
            let mut doc = to_json(batch);
            doc["kernel"] = serde_json::json!({
                "version": kernel.version().to_string(),
                "described": kernel.describe(),
            });
            if let Some(cmp) = comparison {
                doc["comparison"] = compare::to_json(cmp);
            }
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
        Format::Csv => write!(out, "{}", table::render_csv(&batch.rows()))?,
        Format::Sarif => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&sarif::render(batch))?
        )?,
    }
    // Standard output holds a document: the runner reads commands from standard error too.
    for line in annotations.iter().flatten() {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    Ok(())
}

/// The JSON report: every program judged (with its object), those not verified, the objects
/// that could not be read, and the counts.
pub fn to_json(batch: &Batch) -> serde_json::Value {
    use super::table::RowVerdict;
    let programs: Vec<&serde_json::Value> = batch.programs.iter().map(|p| &p.json).collect();
    let not_verified: Vec<serde_json::Value> = batch
        .not_verified
        .iter()
        .map(|n| {
            serde_json::json!({
                "object": n.file, "name": n.name, "section": n.section, "reason": n.reason,
            })
        })
        .collect();
    let failures: Vec<serde_json::Value> = batch
        .failures
        .iter()
        .map(|f| serde_json::json!({ "object": f.file, "error": f.error }))
        .collect();
    serde_json::json!({
        "objects": batch.objects,
        "programs": programs,
        "not_verified": not_verified,
        "not_loaded": failures,
        "summary": {
            "accepted": batch.count(RowVerdict::Accepted),
            "rejected": batch.count(RowVerdict::Rejected),
            "undecided": batch.count(RowVerdict::Undecided),
            "not_verified": batch.not_verified.len(),
            "not_loaded": batch.failures.len(),
        },
    })
}

/// `--kernel A,B,...`: the objects judged once per kernel, reported as a matrix.
fn run_matrix(args: &VerifyArgs) -> Result<Ending> {
    let single_only = [
        (args.baseline.is_some(), "--baseline"),
        (args.sarif.is_some(), "--sarif"),
        (args.junit.is_some(), "--junit"),
        (args.html.is_some(), "--html"),
        (args.explain, "--explain"),
        (args.log_level > 0, "--log-level 1 or 2"),
        (args.format() == Format::Sarif, "--format sarif"),
    ];
    if let Some((_, flag)) = single_only.iter().find(|(given, _)| *given) {
        anyhow::bail!("{flag} reports on one kernel: name one with --kernel");
    }
    let mut columns = Vec::new();
    for (i, kernel) in args.load.kernels().iter().enumerate() {
        // The loader warns about the object, whatever the kernel: once.
        let batch = batch::verify_paths(
            &args.objects,
            args.prog.as_deref(),
            0,
            false,
            i == 0,
            &args.load.options_for(kernel),
            &mut |_, _, _| Ok(()),
            |_, _| {},
        )?;
        columns.push(matrix::Column {
            kernel: kernel.clone(),
            batch,
        });
    }
    let code = matrix::exit_code(&columns);
    let mut out = std::io::stdout().lock();
    let written = match args.format() {
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&matrix::to_json(&columns))?
        ),
        Format::Csv => write!(out, "{}", matrix::render_csv(&columns)),
        _ => write!(out, "{}", matrix::render_text(&columns)),
    };
    Ok(Ending {
        code,
        written: written.map_err(Into::into),
    })
}

/// `--compare BASE NEW`.
fn compare_files(
    base: &Path,
    new: &Path,
    rules: &[compare::Rule],
    format: Format,
) -> Result<Ending> {
    let base_rows = table::read_csv(base)?;
    let new_rows = table::read_csv(new)?;
    let cmp = compare::compare(&base_rows, &new_rows, rules);
    let code = u8::from(!cmp.failures.is_empty());
    let mut out = std::io::stdout().lock();
    let written = match format {
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&compare::to_json(&cmp))?
        )
        .map_err(Into::into),
        Format::Text => write!(out, "{}", compare::render(&cmp)).map_err(Into::into),
        other => Err(anyhow::anyhow!(
            "--compare prints text or JSON, not {other:?}"
        )),
    };
    Ok(Ending { code, written })
}
