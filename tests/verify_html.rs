//! `bpfemu verify --html`: the report accounts for every instruction the verifier processed,
//! on every corpus object; and the page of a rejected program, loaded in headless Chromium,
//! shows the error under its instruction and highlighted, the path to it marked, the states
//! beside the instructions, the loop's visits and the pruning points, with and without
//! script, and nothing it needs comes from elsewhere.
//!
//! The browser tests need Chromium (`apt-get install chromium`, or `BPFEMU_CHROMIUM=PATH`):
//! skipped with a message when it is missing, unless `BPFEMU_REQUIRE_KERNEL=1` (CI), where a
//! skip would pass a report nobody looked at.

#[allow(dead_code)]
mod cli_support;

use bpfemu_verifier::{Options, ProgramInput, verify};
use cli_support::{bpfemu, root, stderr, stdout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory under cargo's temporary directory for integration tests, kept after
/// the run so that the pages and the screenshot can be looked at.
fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

const EXAMPLE: &str = "tests/data/verify/report_example.o";

/// The values of `attr="..."` on each `<tr class="insn...">` row of `html`, in order.
fn row_attrs(html: &str, attr: &str) -> Vec<u64> {
    html.split("<tr ")
        .filter(|row| row.contains("class=\"insn"))
        .map(|row| {
            let start = row.find(&format!("{attr}=\"")).expect("attribute") + attr.len() + 2;
            let end = row[start..].find('"').expect("quote") + start;
            row[start..end].parse().expect("a number")
        })
        .collect()
}

/// The sections of a page, one per verified program.
fn sections(html: &str) -> Vec<&str> {
    html.split("<section ").skip(1).collect()
}

/// On every corpus object, each program's visits and pruned arrivals in the page add up to
/// the processed instructions the verifier reports, so the log was read back whole; a
/// rejected program has one error row, at the instruction the verifier names.
#[test]
fn every_processed_instruction_is_in_the_report() {
    let dir = out_dir("verify_html_corpus");
    let mut objects: Vec<PathBuf> = ["examples/xdp/build", "tests/data/verify"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root().join(d)).expect("objects built"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    let (mut programs, mut rejected) = (0, 0);
    for path in &objects {
        let name = path.to_str().expect("utf-8 path");
        let page = dir.join(format!(
            "{}.html",
            path.file_name().unwrap().to_string_lossy()
        ));
        let out = bpfemu(&["verify", "--json", name, "--html", page.to_str().unwrap()]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", stderr(&out)));
        let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!html.contains("trace-mismatch"), "{name}");
        let reported = doc["programs"].as_array().expect("programs");
        let pages = sections(&html);
        assert_eq!(pages.len(), reported.len(), "{name}");
        for (index, (p, section)) in reported.iter().zip(pages).enumerate() {
            let visits: u64 = row_attrs(section, "data-visits").iter().sum();
            let pruned: u64 = row_attrs(section, "data-pruned").iter().sum();
            assert_eq!(
                serde_json::json!(visits + pruned),
                p["processed_insns"],
                "{name}: {}",
                p["name"]
            );
            let error_rows = section.matches(" error\" data-visits=").count();
            match p["insn"].as_u64() {
                Some(pc) => {
                    rejected += 1;
                    assert_eq!(error_rows, 1, "{name}: {}", p["name"]);
                    let row = section
                        .split("<tr ")
                        .find(|r| r.starts_with(&format!("id=\"p{index}-i{pc}\"")))
                        .unwrap_or_else(|| panic!("{name}: no row for insn {pc}"));
                    assert!(row.contains(" error\""), "{name}: {row}");
                }
                None => assert_eq!(error_rows, 0, "{name}: {}", p["name"]),
            }
            programs += 1;
        }
    }
    assert!(
        programs >= 60 && rejected >= 8,
        "{programs} programs, {rejected} rejected"
    );
}

/// Several objects go to a directory: a page each and an index linking them; a name that
/// ends with `/` is a directory too.
#[test]
fn a_directory_gets_a_page_per_object_and_an_index() {
    let dir = out_dir("verify_html_dir");
    let dest = format!("{}/", dir.join("report").display());
    let out = bpfemu(&["verify", EXAMPLE, "--html", &dest]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let index = std::fs::read_to_string(dir.join("report/index.html")).expect("index");
    assert!(index.contains("href=\"report_example.o.html\""), "{index}");
    let page = std::fs::read_to_string(dir.join("report/report_example.o.html")).expect("page");
    assert!(page.contains("class=\"insn path error\""));
    // Several objects (a directory searched, two with one base name): a page each, all in
    // the index with their counts.
    let many = dir.join("many");
    let out = bpfemu(&[
        "verify",
        "tests/data/verify",
        "examples/xdp/build/pass.v3.o",
        "--html",
        many.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let index = std::fs::read_to_string(many.join("index.html")).expect("index");
    let pages = std::fs::read_dir(&many).unwrap().count() - 1;
    let objects = std::fs::read_dir("tests/data/verify")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "o")
        })
        .count()
        + 1;
    assert_eq!(pages, objects);
    assert_eq!(
        index.matches("<tr><td><a href=").count(),
        objects,
        "{index}"
    );
    assert!(index.contains("href=\"pass.v3.o.html\""), "{index}");
}

/// A report that cannot be written fails the command with the file named, exit 2.
#[test]
fn an_unwritable_report_is_an_error() {
    let out = bpfemu(&["verify", EXAMPLE, "--html", "/nonexistent-dir/report.html"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("bpfemu: /nonexistent-dir/report.html: cannot write the HTML report"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// What the verifier's own logs say about the example: the error's instruction and message,
/// the path (instructions of the level-1 log), visits and pruned arrivals per instruction
/// (the level-2 log).
struct Expected {
    error_pc: usize,
    message: String,
    path: Vec<usize>,
    visits: BTreeMap<usize, u64>,
    pruned: BTreeMap<usize, u64>,
    len: usize,
}

fn expected() -> Expected {
    let obj = bpfemu_loader::load_file(&root().join(EXAMPLE), &Default::default()).expect("loads");
    let prog = &obj.programs[0];
    let judge = |log_level| {
        verify(
            &ProgramInput::new(&obj, prog),
            &Options {
                log_level,
                ..Options::default()
            },
        )
    };
    let (l1, l2) = (judge(1), judge(2));
    let r = l1.rejection().expect("the example is rejected");
    let insn_pc = |line: &str| -> Option<usize> {
        let (n, _) = line.split_once(": (")?;
        n.parse().ok()
    };
    let mut path: Vec<usize> = l1.log.lines().filter_map(insn_pc).collect();
    path.sort();
    path.dedup();
    let mut visits = BTreeMap::new();
    for pc in l2.log.lines().filter_map(insn_pc) {
        *visits.entry(pc).or_insert(0) += 1;
    }
    let mut pruned = BTreeMap::new();
    for line in l2.log.lines().filter(|l| l.ends_with(": safe")) {
        let pc: usize = line
            .trim_end_matches(": safe")
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a safe line names an instruction");
        *pruned.entry(pc).or_insert(0) += 1;
    }
    Expected {
        error_pc: r.insn.expect("the error names an instruction"),
        message: r.message.clone(),
        path,
        visits,
        pruned,
        len: prog.insns.len(),
    }
}

/// The Chromium to run, or `None` (having said why) when the test is to be skipped.
fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("BPFEMU_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
                .find(|p| p.is_file())
        });
    if found.is_some() {
        return found;
    }
    let required = std::env::var("BPFEMU_REQUIRE_KERNEL").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: BPFEMU_REQUIRE_KERNEL=1 but Chromium is not installed (apt-get install chromium)"
    );
    eprintln!(
        "{test}: skipping: Chromium is not installed (apt-get install chromium; set BPFEMU_REQUIRE_KERNEL=1 to fail)"
    );
    None
}

/// Headless Chromium on `url` with `extra` flags; its standard output.
fn chromium(browser: &Path, url: &str, extra: &[&str]) -> String {
    // A profile of its own for each run: the tests run in parallel.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = out_dir(&format!("verify_html_profile_{run}"));
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium: {}", stderr(&out));
    stdout(&out)
}

/// The `<tr ...>` row with `id` in a dumped DOM.
fn row<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr id=\"{id}\""))
        .unwrap_or_else(|| panic!("no row {id}"));
    let end = dom[start..].find("</tr>").expect("row end") + start;
    &dom[start..end]
}

/// The page as Chromium builds it, with and without script: the error row is the error
/// instruction's, marked, with the kernel's message under it; exactly the level-1 log's
/// instructions are on the path; every row's visits and pruned arrivals are the level-2
/// log's; the loop's instructions show their six visits; the states are beside them; the
/// source text is text, not markup.
#[test]
fn the_page_shows_the_error_the_path_and_the_states() {
    let Some(browser) = chromium_or_skip("the_page_shows_the_error_the_path_and_the_states") else {
        return;
    };
    let want = expected();
    let dir = out_dir("verify_html_page");
    let page = dir.join("report.html");
    let out = bpfemu(&["verify", EXAMPLE, "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let url = format!("file://{}", page.display());
    let with_script = chromium(&browser, &url, &["--dump-dom"]);
    assert!(
        with_script.contains("<html lang=\"en\" class=\"js\">"),
        "the script ran"
    );
    // Without script the page is the file as written (Chromium's --dump-dom needs script;
    // how it draws without script is measured in the next test).
    let without_script = std::fs::read_to_string(&page).expect("the page");
    for dom in [&with_script, &without_script] {
        let error = row(dom, &format!("p0-i{}", want.error_pc));
        assert!(error.contains("class=\"insn path error\""), "{error}");
        // The state the error was found in, with the register the message names.
        let reg = want.message.split_whitespace().next().expect("a register");
        assert!(error.contains("when reached:"), "{error}");
        assert!(error.contains(&format!(">{reg}</b>=<i>pkt(")), "{error}");
        let message_row = &dom[dom.find("id=\"p0-error\"").expect("the error's row")..];
        let message_row = &message_row[..message_row.find("</tr>").unwrap()];
        assert!(message_row.contains(&want.message), "{message_row}");
        assert!(
            message_row.contains("invalid access to packet, off=23 size=1"),
            "{message_row}"
        );
        for pc in 0..want.len {
            let Some(r) = dom
                .find(&format!("<tr id=\"p0-i{pc}\""))
                .map(|_| row(dom, &format!("p0-i{pc}")))
            else {
                continue; // the second slot of a 16-byte load has no row
            };
            let on_path = r.contains("class=\"insn path");
            assert_eq!(on_path, want.path.contains(&pc), "insn {pc}: {r}");
            let visits = want.visits.get(&pc).copied().unwrap_or(0);
            assert!(
                r.contains(&format!("data-visits=\"{visits}\"")),
                "insn {pc}: {r}"
            );
            let pruned = want.pruned.get(&pc).copied().unwrap_or(0);
            assert!(
                r.contains(&format!("data-pruned=\"{pruned}\"")),
                "insn {pc}: {r}"
            );
            if pruned > 0 {
                assert!(r.contains(&format!("pruned ×{pruned}")), "insn {pc}: {r}");
            }
            if visits > 0 {
                assert!(
                    r.contains("<td class=\"state\"><b") || r.contains("when reached"),
                    "insn {pc}: {r}"
                );
            } else {
                assert!(r.contains("class=\"insn unreached\""), "insn {pc}: {r}");
            }
        }
        // The loop: its instructions walked six times, on the path six times, in loop 1.
        let looped: Vec<usize> = want
            .visits
            .iter()
            .filter(|(_, v)| **v == 6)
            .map(|(pc, _)| *pc)
            .collect();
        assert!(looped.len() >= 5, "{looped:?}");
        for pc in looped {
            let r = row(dom, &format!("p0-i{pc}"));
            assert!(
                r.contains("path ×6") && r.contains("loop 1"),
                "insn {pc}: {r}"
            );
        }
        assert!(want.pruned.values().sum::<u64>() > 0, "the example prunes");
        // Source text escaped: `->` is text, and no element came from the program.
        assert!(
            dom.contains("ip-&gt;protocol == IPPROTO_UDP"),
            "source line"
        );
        // Nothing fetched: no external script, style, image or frame.
        for fetch in [
            "src=\"http",
            "href=\"http",
            "<link",
            "<img",
            "<iframe",
            "@import",
        ] {
            assert!(!dom.contains(fetch), "{fetch}");
        }
    }
}

/// Chromium draws the page, with script and without: the error row in red, the path in
/// yellow, other rows plain, the error row on screen; with script, the filter leaves only the
/// path; without, the controls that need script are not shown. Measured by a page that holds
/// the report in two frames (one sandboxed without script) and writes what it computes into
/// its own DOM.
#[test]
fn the_page_draws_the_error_and_the_path_highlighted() {
    let Some(browser) = chromium_or_skip("the_page_draws_the_error_and_the_path_highlighted")
    else {
        return;
    };
    let dir = out_dir("verify_html_drawn");
    let page = dir.join("report.html");
    let out = bpfemu(&["verify", EXAMPLE, "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let probe = dir.join("probe.html");
    std::fs::write(&probe, PROBE).expect("probe page");
    let dom = chromium(
        &browser,
        &format!("file://{}", probe.display()),
        &[
            "--dump-dom",
            "--allow-file-access-from-files",
            "--window-size=1400,1000",
        ],
    );
    let start = dom.find("<pre id=\"out\">").expect("probe output") + "<pre id=\"out\">".len();
    let end = dom[start..].find("</pre>").unwrap() + start;
    let json = dom[start..end].replace("&quot;", "\"");
    let seen: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    for frame in ["script", "noscript"] {
        let seen = &seen[frame];
        let rgb = |key: &str| -> [u32; 3] {
            let s = seen[key]
                .as_str()
                .unwrap_or_else(|| panic!("{frame} {key}: {seen}"));
            let n: Vec<u32> = s
                .trim_start_matches("rgba(")
                .trim_start_matches("rgb(")
                .trim_end_matches(')')
                .split(',')
                .map(|x| x.trim().parse::<f64>().expect("a colour") as u32)
                .collect();
            [n[0], n[1], n[2]]
        };
        let [r, g, b] = rgb("error");
        assert!(
            r > 200 && r > g + 25 && r > b + 25,
            "{frame}: error row {seen}"
        );
        let [r, g, b] = rgb("path");
        assert!(r > 200 && g > 200 && b + 40 < g, "{frame}: path row {seen}");
        assert!(
            seen["plain"] == "rgba(0, 0, 0, 0)" || seen["plain"] == "rgb(255, 255, 255)",
            "{frame}: plain row {seen}"
        );
        assert_eq!(
            seen["errorHeight"].as_f64().map(|h| h > 0.0),
            Some(true),
            "{frame}: {seen}"
        );
        assert!(seen["pathRows"].as_u64().unwrap() > 10, "{frame}: {seen}");
    }
    let (script, noscript) = (&seen["script"], &seen["noscript"]);
    assert_eq!(script["js"], true, "{seen}");
    assert_eq!(script["visibleOffPathAfterFilter"], 0, "{seen}");
    assert_eq!(
        script["visiblePathAfterFilter"], script["pathRows"],
        "{seen}"
    );
    assert_eq!(noscript["js"], false, "{seen}");
    assert_eq!(noscript["controls"], "none", "{seen}");
    assert_eq!(script["controls"], "inline", "{seen}");
    // The picture itself, kept beside the page for people to look at.
    let shot = dir.join("report.png");
    chromium(
        &browser,
        &format!("file://{}", page.display()),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,1800",
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let dim = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (1400, 1800));
    eprintln!("screenshot: {}", shot.display());
}

/// Loads `report.html` in two frames, one sandboxed without script, and writes, as JSON, for
/// each the colours Chromium computed for an error, a path and a plain row, whether the
/// script-only controls show, and (with script) what the "only the path" filter leaves.
const PROBE: &str = r#"<!DOCTYPE html>
<html><body>
<iframe id="script" src="report.html" width="1400" height="900"></iframe>
<iframe id="noscript" sandbox="allow-same-origin" src="report.html" width="1400" height="900"></iframe>
<pre id="out"></pre>
<script>
var seen = {}, waiting = 2;
function measure(frame) {
  var d = frame.contentDocument, w = frame.contentWindow;
  var bg = function (sel) { var e = d.querySelector(sel); return e ? w.getComputedStyle(e).backgroundColor : null; };
  var visible = function (sel) {
    return Array.prototype.filter.call(d.querySelectorAll(sel), function (e) { return e.getClientRects().length > 0; }).length;
  };
  var s = {
    error: bg('tr.insn.error td.code'),
    path: bg('tr.insn.path:not(.error) td.code'),
    plain: bg('tr.insn:not(.path):not(.unreached) td.code'),
    errorHeight: d.querySelector('tr.insn.error').getBoundingClientRect().height,
    pathRows: d.querySelectorAll('tr.insn.path').length,
    js: d.documentElement.classList.contains('js'),
    controls: w.getComputedStyle(d.querySelector('.js-only')).display
  };
  if (s.js) {
    d.getElementById('only-path').click();
    s.visibleOffPathAfterFilter = visible('tr.insn:not(.path)');
    s.visiblePathAfterFilter = visible('tr.insn.path');
  }
  seen[frame.id] = s;
  if (--waiting === 0) document.getElementById('out').textContent = JSON.stringify(seen);
}
['script', 'noscript'].forEach(function (id) {
  var f = document.getElementById(id);
  f.addEventListener('load', function () { measure(f); });
});
</script>
</body></html>
"#;
