//! `bpfemu verify --html`: a page per object that shows what the verifier did, for people
//! who would otherwise read the log. Each program's source lines (BTF line_info), under each
//! its instructions as `bpfemu disasm` prints them, beside each instruction the register
//! state the verifier had after it, how often the walk visited it (a loop shows as many
//! visits), where the walk pruned (`safe` in the log) and its loop in the control-flow
//! graph; the path to the error (the level-1 log, which keeps that path and nothing else)
//! is highlighted and the error stands under its instruction. The page is the log made
//! navigable, as bpfvv makes it, and holds the log itself too.
//!
//! Self-contained (inline style and a few lines of script, nothing fetched), readable
//! without script; every text from the object or the log is escaped.

mod trace;

use crate::disasm::{self, Listed};
use crate::verify::{self, ProgramVerdict, Report};
use anyhow::Context;
use bpfemu_loader::{Object, ProgramSpec};
use bpfemu_verifier::Options;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use trace::{Key, State};

/// One object's verification, as `bpfemu verify` made it.
pub struct ObjectReport<'a> {
    /// The object as the command line named it.
    pub name: &'a str,
    pub object: &'a Object,
    pub report: &'a Report<'a>,
}

/// How much of each log a page embeds: a level-2 log of a program near the complexity limit
/// runs to hundreds of megabytes, which no browser shows; the table above it is bounded by
/// the program's size.
const EMBEDDED_LOG_BYTES: usize = 1 << 20;

/// Writes the report for `objects` and returns the page to open (see [`HtmlWriter`]).
pub fn write(dest: &Path, objects: &[ObjectReport<'_>]) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(!objects.is_empty(), "no object to report on");
    let mut writer = HtmlWriter::new(dest, objects.len() > 1)?;
    for object in objects {
        writer.add(object)?;
    }
    writer.finish()
}

/// The report written as objects are judged, so that no object outlives its page. One
/// object goes to `dest` as one page, unless `dest` is a directory (existing, or named with a
/// trailing `/`); several objects go to `dest` as a directory: a page per object and
/// `index.html` listing them, so that each page stays as small as its object and CI keeps the
/// directory as one artifact.
pub struct HtmlWriter {
    dest: PathBuf,
    as_dir: bool,
    used: Vec<String>,
    rows: Vec<IndexRow>,
    single: Option<PathBuf>,
}

/// What the index says of one object.
struct IndexRow {
    file: String,
    name: String,
    counts: [usize; 5],
}

impl HtmlWriter {
    /// `many`: more than one object may come (several given, or a directory searched).
    pub fn new(dest: &Path, many: bool) -> anyhow::Result<HtmlWriter> {
        let as_dir = many || dest.is_dir() || dest.as_os_str().to_string_lossy().ends_with('/');
        if as_dir {
            std::fs::create_dir_all(dest).with_context(|| {
                format!("{}: cannot create the report directory", dest.display())
            })?;
        }
        Ok(HtmlWriter {
            dest: dest.to_owned(),
            as_dir,
            used: vec!["index.html".to_owned()],
            rows: Vec::new(),
            single: None,
        })
    }

    /// Writes `object`'s page.
    pub fn add(&mut self, object: &ObjectReport<'_>) -> anyhow::Result<()> {
        let path = match self.as_dir {
            true => self.dest.join(page_file_name(object.name, &mut self.used)),
            false => self.dest.clone(),
        };
        std::fs::write(&path, object_page(object))
            .with_context(|| format!("{}: cannot write the HTML report", path.display()))?;
        let count = |w: &str| {
            object
                .report
                .verdicts
                .iter()
                .filter(|v| v.word() == w)
                .count()
        };
        let not_verified = object.report.not_verified.len();
        self.rows.push(IndexRow {
            file: path
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            name: object.name.to_owned(),
            counts: [
                object.report.verdicts.len() + not_verified,
                count("accepted"),
                count("rejected"),
                count("undecided"),
                not_verified,
            ],
        });
        self.single.get_or_insert(path);
        Ok(())
    }

    /// Writes the index (directory form) and returns the page to open.
    pub fn finish(self) -> anyhow::Result<PathBuf> {
        if !self.as_dir {
            return self.single.context("no object to report on");
        }
        let index = self.dest.join("index.html");
        std::fs::write(&index, index_page(&self.rows))
            .with_context(|| format!("{}: cannot write the HTML report", index.display()))?;
        Ok(index)
    }
}

/// `NAME.html` after the object's file name, numbered when two objects share a name.
fn page_file_name(object: &str, used: &mut Vec<String>) -> String {
    let base = Path::new(object)
        .file_name()
        .map_or_else(|| "object".to_owned(), |n| n.to_string_lossy().into_owned());
    let mut name = format!("{base}.html");
    let mut n = 2;
    while used.contains(&name) {
        name = format!("{base}-{n}.html");
        n += 1;
    }
    used.push(name.clone());
    name
}

/// HTML-escapes text for element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root { --path: #fff4c2; --path-edge: #d29b00; --err: #ffd9d6; --err-edge: #c5221f; --src: #eef3f9; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #1b1b1b; }
h1 { font-size: 1.4em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin: 1.6em 0 .3em; }
code, pre, .state { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
.verdict { padding: 0 .4em; border-radius: 3px; font-weight: 600; }
.verdict.accepted { background: #d7f2dd; color: #11602b; }
.verdict.rejected { background: var(--err); color: #8a1410; }
.verdict.undecided, .verdict.not-verified { background: #e8e8e8; color: #444; }
.summary { border-left: 4px solid var(--err-edge); background: #fff7f6; padding: .4em .8em; margin: .5em 0; }
.summary pre { margin: .3em 0; white-space: pre-wrap; }
.legend span { margin-right: 1.2em; }
.warn { background: #fff0c2; padding: .3em .6em; }
table.listing { border-collapse: collapse; width: 100%; }
table.listing th { text-align: left; position: sticky; top: 0; background: #fafafa; border-bottom: 1px solid #ccc; }
table.listing td { padding: 1px 6px; vertical-align: top; border-bottom: 1px solid #f0f0f0; }
tr.src td { background: var(--src); color: #16365c; padding-top: 4px; }
tr.src td.loc { white-space: nowrap; color: #53698a; }
tr.func td { background: #e4e9f0; font-weight: 600; }
tr.insn td.pc { text-align: right; color: #666; }
tr.insn td.code, td.pc, td.visits, td.notes { white-space: nowrap; width: 1%; }
tr.insn td.visits { text-align: right; }
tr.insn.unreached td { color: #9a9a9a; }
tr.insn.path td { background: var(--path); }
tr.insn.path td.mark { border-left: 4px solid var(--path-edge); }
tr.insn.error td { background: var(--err); font-weight: 600; }
tr.insn.error td.mark { border-left: 4px solid var(--err-edge); }
tr.error-msg td { background: var(--err); color: #8a1410; border-left: 4px solid var(--err-edge); }
tr.error-msg pre { margin: 0; white-space: pre-wrap; }
td.mark { width: 1%; text-align: center; }
td.state { width: 75%; }
.b { display: inline-block; padding: 0 .35em; margin-right: .3em; border-radius: 3px; font-size: 11.5px; white-space: nowrap; }
.b.loop { background: #ebe0fb; color: #4b2a85; }
.b.pruned { background: #dff3e4; color: #1d6b35; }
.b.onpath { background: #fbe7a6; color: #6b4b00; }
.state { white-space: normal; word-break: break-word; }
.state b { color: #0b57d0; font-weight: normal; cursor: pointer; }
.state b.t { font-weight: 700; text-decoration: underline; }
.state b.hl { background: #ffe066; }
.state .frame { color: #666; }
.state i { color: #7b1fa2; font-style: normal; }
.state .when { color: #8a1410; }
details.visits summary { color: #555; cursor: pointer; font-size: 12px; }
details.visits ol { margin: .2em 0 .2em 1.2em; padding: 0; }
pre.log { background: #f7f7f7; padding: .6em; overflow-x: auto; max-height: 40em; }
pre.log a { color: inherit; text-decoration: none; } pre.log a:hover { text-decoration: underline; }
.js-only { display: none; } html.js .js-only { display: inline; }
body.only-path tr.insn:not(.path), body.only-path tr.src:not(.path), body.only-path tr.func { display: none; }
"#;

/// Script that adds, where it runs: the "only the rejected path" filter, and a click on a
/// register's name marks that register in every state. The page reads the same without it.
const SCRIPT: &str = r#"
document.documentElement.classList.add('js');
document.addEventListener('change', function (e) {
  if (e.target.id === 'only-path') document.body.classList.toggle('only-path', e.target.checked);
});
document.addEventListener('click', function (e) {
  var k = e.target.closest && e.target.closest('.state b');
  if (!k) return;
  var on = !k.classList.contains('hl');
  document.querySelectorAll('.state b.hl').forEach(function (x) { x.classList.remove('hl'); });
  if (on) document.querySelectorAll('.state b').forEach(function (x) {
    if (x.textContent === k.textContent) x.classList.add('hl');
  });
});
"#;

fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"bpfemu {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title)
    );
}

fn tail(out: &mut String) {
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
}

/// The index of a directory report: each object with its verdicts.
fn index_page(rows: &[IndexRow]) -> String {
    let mut out = String::new();
    head(&mut out, "bpfemu verify");
    out.push_str("<h1>bpfemu verify</h1>\n<table class=\"listing\">\n<thead><tr><th>object</th><th>programs</th><th>accepted</th><th>rejected</th><th>undecided</th><th>not verified</th></tr></thead>\n<tbody>\n");
    for row in rows {
        let [programs, accepted, rejected, undecided, not_verified] = row.counts;
        let _ = writeln!(
            out,
            "<tr><td><a href=\"{}\">{}</a></td><td>{programs}</td><td>{accepted}</td><td>{rejected}</td><td>{undecided}</td><td>{not_verified}</td></tr>",
            esc(&row.file),
            esc(&row.name),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    tail(&mut out);
    out
}

/// One object's page.
fn object_page(object: &ObjectReport<'_>) -> String {
    let mut out = String::new();
    head(&mut out, &format!("bpfemu verify {}", object.name));
    let _ = writeln!(
        out,
        "<h1>bpfemu verify <code>{}</code></h1>",
        esc(object.name)
    );
    contents(&mut out, object);
    out.push_str(
        "<p class=\"legend\"><span class=\"b onpath\">path</span><span>on the path to the error \
         (the level-1 log)</span> <span class=\"b loop\">loop N</span><span>in a loop of the \
         control-flow graph</span> <span class=\"b pruned\">pruned</span><span>the walk stopped \
         here: an earlier state covered it (<code>safe</code>)</span> <span>visits: times the \
         walk processed the instruction</span> <span class=\"state\"><b class=\"t\">R1</b></span> \
         <span>read or written by the instruction</span></p>\n\
         <p class=\"js-only\"><label><input type=\"checkbox\" id=\"only-path\"> only the path to \
         the error</label> · click a register to mark it in every state</p>\n",
    );
    let kernel_btf = disasm::calls_kfuncs(object.object)
        .then(|| object.object.kernel.btf().ok())
        .flatten();
    for (index, v) in object.report.verdicts.iter().enumerate() {
        let view = ProgramView::new(object.object, v, index, kernel_btf);
        view.render(&mut out);
    }
    tail(&mut out);
    out
}

/// The list of programs at the top, each linked to its section.
fn contents(out: &mut String, object: &ObjectReport<'_>) {
    out.push_str("<ul class=\"contents\">\n");
    for (index, v) in object.report.verdicts.iter().enumerate() {
        let _ = writeln!(
            out,
            "<li><a href=\"#p{index}\">{}</a> ({}) <span class=\"verdict {word}\">{word}</span></li>",
            esc(&v.program.name),
            esc(&v.program.section),
            word = v.word()
        );
    }
    for p in &object.report.not_verified {
        let _ = writeln!(
            out,
            "<li>{} ({}) <span class=\"verdict not-verified\">not verified</span> {}</li>",
            esc(&p.name),
            esc(&p.section),
            esc(&verify::not_verified_reason(p))
        );
    }
    out.push_str("</ul>\n");
}

/// One program with what its two logs say.
struct ProgramView<'a> {
    v: &'a ProgramVerdict<'a>,
    listing: Vec<Listed<'a>>,
    /// What the page embeds of each log: the end of the level-1 log (the error is there),
    /// the start of the level-2 log.
    level1: Excerpt,
    level2: Excerpt,
    /// Processed instructions of the level-2 walk.
    processed: u64,
    trace: trace::Trace,
    path: Option<trace::Path>,
    /// The id prefix of this program's anchors.
    id: String,
}

impl<'a> ProgramView<'a> {
    fn new(
        obj: &'a Object,
        v: &'a ProgramVerdict<'a>,
        index: usize,
        kernel_btf: Option<&bpfemu_loader::btf::Btf>,
    ) -> ProgramView<'a> {
        let program: &ProgramSpec = v.program;
        let judged = |log_level| {
            verify::judge(
                obj,
                program,
                &Options {
                    log_level,
                    ..Options::default()
                },
            )
        };
        let len = program.insns.len();
        let texts: Vec<Option<String>> = (0..len)
            .map(|pc| verify::insn_line(v.kernel, &program.insns, pc))
            .collect();
        let insn_text = |pc: usize| texts.get(pc).cloned().flatten();
        let is_helper_call = |pc: usize| {
            program
                .insns
                .get(pc)
                .is_some_and(|i| i.code == 0x85 && i.src != 1)
        };
        // One log at a time, each dropped once read: near the complexity limit a log runs to
        // hundreds of megabytes.
        let level2 = judged(2);
        let trace = trace::trace(&level2.log, len, &insn_text, &is_helper_call);
        let processed = level2.stats.processed_insns;
        let level2 = Excerpt::start(&level2.log);
        let level1 = judged(1);
        // The level-1 log is the path to the error only when there is an error.
        let path = level1
            .rejection()
            .map(|_| trace::path(&level1.log, len, &insn_text, &is_helper_call));
        let level1 = Excerpt::end(&level1.log);
        ProgramView {
            v,
            listing: disasm::listing(obj, program, kernel_btf),
            level1,
            level2,
            processed,
            trace,
            path,
            id: format!("p{index}"),
        }
    }

    fn error_pc(&self) -> Option<usize> {
        self.v.verdict.rejection().and_then(|r| r.insn)
    }

    fn on_path(&self, pc: usize) -> bool {
        self.path.as_ref().is_some_and(|p| p.on_path(pc))
    }

    fn render(&self, out: &mut String) {
        let p = self.v.program;
        let word = self.v.word();
        let _ = writeln!(
            out,
            "<section class=\"program {word}\" id=\"{}\">\n<h2>{} <small>({})</small> <span class=\"verdict {word}\">{word}</span></h2>",
            self.id,
            esc(&p.name),
            esc(&p.section)
        );
        let s = &self.v.verdict.stats;
        let depth: Vec<String> = s.stack_depth.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "<p class=\"stats\">{} insns processed (limit 1000000), {} states (peak {}), at most {} per insn, stack depth {}, {:.3} ms</p>",
            s.processed_insns,
            s.total_states,
            s.peak_states,
            s.max_states_per_insn,
            if depth.is_empty() {
                "0".to_owned()
            } else {
                depth.join("+")
            },
            s.time.as_secs_f64() * 1e3
        );
        self.summary(out);
        self.consistency(out);
        self.table(out);
        self.logs(out);
        out.push_str("</section>\n");
    }

    /// The error in the compilers' form, linked to its row, with the log's lines about it.
    fn summary(&self, out: &mut String) {
        let Some(r) = self.v.verdict.rejection() else {
            return;
        };
        out.push_str("<div class=\"summary\">\n");
        let source = r.source.clone().or_else(|| {
            r.insn
                .and_then(|pc| verify::source_of(&self.v.program.line_info, pc))
        });
        let place = match &source {
            Some(src) if src.column > 0 => format!("{}:{}:{}", src.file_name, src.line, src.column),
            Some(src) => format!("{}:{}", src.file_name, src.line),
            None => self.v.program.name.clone(),
        };
        let target = match r.insn {
            Some(pc) => format!("#{}-i{pc}", self.id),
            None => format!("#{}", self.id),
        };
        let _ = writeln!(
            out,
            "<p><a href=\"{target}\">{}</a>: <strong>error:</strong> {}</p>",
            esc(&place),
            esc(&r.message)
        );
        let lines: Vec<&str> = self
            .path
            .as_ref()
            .map(|p| p.error_lines().collect())
            .unwrap_or_default();
        if lines.len() > 1 {
            let _ = writeln!(out, "<pre>{}</pre>", esc(&lines.join("\n")));
        }
        if let Some(note) = &r.note {
            let _ = writeln!(out, "<p>note: {}</p>", esc(note));
        }
        out.push_str("</div>\n");
    }

    /// Says so when the log read back does not account for every processed instruction:
    /// the table would then show less than the verifier did.
    fn consistency(&self, out: &mut String) {
        let read = self.trace.processed();
        let processed = self.processed;
        // The instruction past the complexity limit counts as processed but is refused
        // before the log prints it.
        let too_large = self
            .v
            .verdict
            .rejection()
            .is_some_and(|r| r.message.starts_with("BPF program is too large"));
        if read + u64::from(too_large) != processed {
            let _ = writeln!(
                out,
                "<p class=\"warn trace-mismatch\">The level-2 log accounts for {read} of the {processed} processed instructions; the visits below may be short.</p>"
            );
        }
    }

    fn table(&self, out: &mut String) {
        let state = match self.path {
            Some(_) => {
                "state after it (on the path to the error: its last pass; elsewhere: its first visit)"
            }
            None => "state after it (its first visit)",
        };
        let _ = write!(
            out,
            "<table class=\"listing\">\n<thead><tr><th></th><th>insn</th><th>instruction</th>\
             <th title=\"times the verifier processed it\">visits</th><th>marks</th>\
             <th>{state}</th></tr></thead>\n<tbody>\n",
        );
        let groups = self.source_groups_on_path();
        let mut group = 0;
        for line in &self.listing {
            match line {
                Listed::Function(sig) => {
                    let _ = writeln!(
                        out,
                        "<tr class=\"func\"><td></td><td colspan=\"5\"><code>{}</code></td></tr>",
                        esc(sig)
                    );
                }
                Listed::Source(src) => {
                    let path = if groups.get(group).copied().unwrap_or(false) {
                        " path"
                    } else {
                        ""
                    };
                    group += 1;
                    let _ = writeln!(
                        out,
                        "<tr class=\"src{path}\"><td colspan=\"2\" class=\"loc\">{}:{}</td><td colspan=\"4\"><code>{}</code></td></tr>",
                        esc(&src.file_name),
                        src.line,
                        esc(src.line_text.trim())
                    );
                }
                Listed::Insn { pc, code, text } => self.insn_row(out, *pc, *code, text),
            }
        }
        out.push_str("</tbody>\n</table>\n");
    }

    /// For each source line of the listing, whether one of its instructions is on the path.
    fn source_groups_on_path(&self) -> Vec<bool> {
        let mut groups: Vec<bool> = Vec::new();
        for line in &self.listing {
            match line {
                Listed::Source(_) => groups.push(false),
                Listed::Insn { pc, .. } if self.on_path(*pc) => {
                    if let Some(last) = groups.last_mut() {
                        *last = true;
                    }
                }
                _ => {}
            }
        }
        groups
    }

    fn insn_row(&self, out: &mut String, pc: usize, code: u8, text: &str) {
        let t = &self.trace.insns[pc];
        let path_visits = self.path.as_ref().map_or(0, |p| p.visits[pc]);
        let is_error = self.error_pc() == Some(pc);
        let mut class = String::from("insn");
        if t.visits == 0 && t.pruned == 0 && path_visits == 0 {
            class.push_str(" unreached");
        }
        if path_visits > 0 {
            class.push_str(" path");
        }
        if is_error {
            class.push_str(" error");
        }
        let mark = match (is_error, path_visits > 0) {
            (true, _) => "<span title=\"the error\">✖</span>",
            (false, true) => "<span title=\"on the path to the error\">▸</span>",
            _ => "",
        };
        let _ = write!(
            out,
            "<tr id=\"{id}-i{pc}\" class=\"{class}\" data-visits=\"{}\" data-pruned=\"{}\" data-path-visits=\"{path_visits}\">\
             <td class=\"mark\">{mark}</td><td class=\"pc\"><a href=\"#{id}-i{pc}\">{pc}</a></td>\
             <td class=\"code\"><code>({code:02x}) {}</code></td><td class=\"visits\">{}</td><td class=\"notes\">",
            t.visits,
            t.pruned,
            esc(text),
            if t.visits == 0 && t.pruned == 0 {
                "–".to_owned()
            } else {
                t.visits.to_string()
            },
            id = self.id,
        );
        if path_visits > 0 {
            let times = if path_visits > 1 {
                format!(" ×{path_visits}")
            } else {
                String::new()
            };
            let _ = write!(out, "<span class=\"b onpath\">path{times}</span>");
        }
        if t.scc > 0 {
            let _ = write!(out, "<span class=\"b loop\">loop {}</span>", t.scc);
        }
        if t.pruned > 0 {
            let _ = write!(out, "<span class=\"b pruned\">pruned ×{}</span>", t.pruned);
        }
        out.push_str("</td><td class=\"state\">");
        self.state_cell(out, pc, is_error);
        out.push_str("</td></tr>\n");
        if is_error {
            self.error_row(out);
        }
    }

    /// The state beside an instruction: on the path, the path's (for the error, the state
    /// it was found in); elsewhere the first visit's; then every kept visit.
    fn state_cell(&self, out: &mut String, pc: usize, is_error: bool) {
        let t = &self.trace.insns[pc];
        let path = self.path.as_ref();
        if is_error
            && let Some((last, before)) = path.and_then(|p| p.last.as_ref())
            && *last == pc
        {
            out.push_str("<span class=\"when\">when reached: </span>");
            state_html(out, before);
        } else if let Some(state) = path.and_then(|p| p.after[pc].as_ref()) {
            state_html(out, state);
        } else if let Some(state) = t.states.first() {
            state_html(out, state);
        }
        if t.states.len() > 1 || (t.visits > 1 && !t.states.is_empty()) {
            let shown = t.states.len();
            let _ = write!(
                out,
                "<details class=\"visits\"><summary>after each visit ({} of {})</summary><ol>",
                shown, t.visits
            );
            for s in &t.states {
                out.push_str("<li>");
                state_html(out, s);
                out.push_str("</li>");
            }
            out.push_str("</ol></details>");
        }
    }

    /// The kernel's lines about the error, under the instruction.
    fn error_row(&self, out: &mut String) {
        let Some(r) = self.v.verdict.rejection() else {
            return;
        };
        let mut lines: Vec<&str> = self
            .path
            .as_ref()
            .map(|p| p.error_lines().collect())
            .unwrap_or_default();
        if !lines.contains(&r.message.as_str()) {
            lines.push(&r.message);
        }
        let _ = writeln!(
            out,
            "<tr class=\"error-msg path\" id=\"{}-error\"><td></td><td colspan=\"5\"><strong>error:</strong><pre>{}</pre></td></tr>",
            self.id,
            esc(&lines.join("\n"))
        );
    }

    /// The two logs, each instruction line linked to its row.
    fn logs(&self, out: &mut String) {
        if self.path.is_some() {
            self.log_block(
                out,
                "The verifier's log at level 1: the path to the error",
                &self.level1,
            );
        }
        self.log_block(
            out,
            "The verifier's log at level 2: every state",
            &self.level2,
        );
    }

    fn log_block(&self, out: &mut String, title: &str, log: &Excerpt) {
        if log.text.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<details class=\"log\"><summary>{}</summary><pre class=\"log\">",
            esc(title)
        );
        let left_out = format!(
            "… {} bytes left out: <code>bpfemu verify --log-level N</code> prints it all",
            log.left_out
        );
        if log.left_out > 0 && log.kept_end {
            let _ = writeln!(out, "{left_out}");
        }
        for line in log.text.lines() {
            let insn = line
                .split_once(": (")
                .and_then(|(n, _)| n.parse::<usize>().ok())
                .filter(|pc| *pc < self.trace.insns.len());
            match insn {
                Some(pc) => {
                    let _ = writeln!(out, "<a href=\"#{}-i{pc}\">{}</a>", self.id, esc(line));
                }
                None => {
                    let _ = writeln!(out, "{}", esc(line));
                }
            }
        }
        if log.left_out > 0 && !log.kept_end {
            let _ = writeln!(out, "{left_out}");
        }
        out.push_str("</pre></details>\n");
    }
}

/// The part of a log a page embeds: whole lines, at most [`EMBEDDED_LOG_BYTES`].
struct Excerpt {
    text: String,
    /// Bytes of the log not embedded.
    left_out: usize,
    /// Whether the end was kept (else the start).
    kept_end: bool,
}

impl Excerpt {
    fn start(log: &str) -> Excerpt {
        let cut = if log.len() <= EMBEDDED_LOG_BYTES {
            log.len()
        } else {
            // Bytes, not characters: a line break is always a character boundary.
            let bytes = &log.as_bytes()[..EMBEDDED_LOG_BYTES];
            bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
        };
        Excerpt {
            text: log[..cut].to_owned(),
            left_out: log.len() - cut,
            kept_end: false,
        }
    }

    fn end(log: &str) -> Excerpt {
        let cut = if log.len() <= EMBEDDED_LOG_BYTES {
            0
        } else {
            let from = log.len() - EMBEDDED_LOG_BYTES;
            let bytes = &log.as_bytes()[from..];
            bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(log.len(), |i| from + i + 1)
        };
        Excerpt {
            text: log[cut..].to_owned(),
            left_out: cut,
            kept_end: true,
        }
    }
}

/// A state as the log prints it, each name clickable (`<b>`), pointers told apart from
/// scalars (`<i>`); the markup is short because a page holds thousands of states.
fn state_html(out: &mut String, state: &State) {
    if state.frame > 0 {
        let _ = write!(out, "<span class=\"frame\">frame{}:</span> ", state.frame);
    }
    for (i, (key, value)) in state.entries.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        // What the instruction read or wrote stands out, as the log prints only those.
        let class = if state.touched.contains(key) {
            " class=\"t\""
        } else {
            ""
        };
        let _ = write!(out, "<b{class}>{}</b>=", esc(&key.name()));
        if is_pointer(key, value) {
            let _ = write!(out, "<i>{}</i>", esc(value));
        } else {
            out.push_str(&esc(value));
        }
    }
}

/// Whether a register or stack slot holds a pointer (`pkt(r=14)`, `ctx()`, `fp-8`,
/// `map_value(...)`), not a scalar (`scalar(...)`, `5`, `P3`) or spilled bytes (`mmmm????`).
fn is_pointer(key: &Key, value: &str) -> bool {
    matches!(key, Key::Reg(_) | Key::Stack(_))
        && !value.contains("scalar")
        && !value.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == 'P')
        && !value.chars().all(|c| "mz0?".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            esc(r#"if (a < b && c > "d") 'e'"#),
            "if (a &lt; b &amp;&amp; c &gt; &quot;d&quot;) &#39;e&#39;"
        );
    }

    #[test]
    fn excerpts_keep_whole_lines_within_the_bound() {
        // Lines of several-byte characters, so a cut by bytes would split one.
        let line = "; état → ok\n";
        let log = line.repeat(EMBEDDED_LOG_BYTES / line.len() + 10);
        let start = Excerpt::start(&log);
        let end = Excerpt::end(&log);
        for e in [&start, &end] {
            assert!(e.text.len() <= EMBEDDED_LOG_BYTES);
            assert_eq!(e.text.len() + e.left_out, log.len());
            assert!(e.text.lines().all(|l| l == "; état → ok"));
        }
        assert!(log.starts_with(&start.text) && log.ends_with(&end.text));
        let short = Excerpt::end("a\nb\n");
        assert_eq!((short.text.as_str(), short.left_out), ("a\nb\n", 0));
    }

    #[test]
    fn page_names_do_not_collide() {
        let mut used = vec!["index.html".to_owned()];
        assert_eq!(page_file_name("a/x.o", &mut used), "x.o.html");
        assert_eq!(page_file_name("b/x.o", &mut used), "x.o-2.html");
        assert_eq!(page_file_name("index", &mut used), "index-2.html");
    }
}
