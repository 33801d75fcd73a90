//! `bpfemu verify` where CI lives: many objects at once, veristat's table and CSV (and its
//! CSV read back as a baseline), comparisons that fail on thresholds, and the files CI tools
//! read (SARIF, JUnit, GitHub workflow commands), each checked with a reader of that format.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, assert_exit, bpfemu, kernel_or_skip, python, root, stderr, stdout};
use std::collections::BTreeMap;
use std::process::Command;

/// A CSV as header-keyed rows.
fn csv_rows(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(str::to_owned))
                .collect()
        })
        .collect()
}

const CORPUS: [&str; 2] = ["examples/xdp/build", "tests/data/verify"];

/// Directories are searched for BPF objects; every program is one row, with veristat's
/// column names, its verdict words, and the values the JSON report gives; exit 1 as one of
/// them is rejected.
#[test]
fn many_objects_give_one_row_per_program() {
    let csv = bpfemu(&["verify", CORPUS[0], CORPUS[1], "--csv"]);
    assert_exit(&csv, 1);
    let json = bpfemu(&["verify", CORPUS[0], CORPUS[1], "--json"]);
    assert_exit(&json, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    let programs = doc["programs"].as_array().expect("programs");
    let rows = csv_rows(&stdout(&csv));
    assert_eq!(rows.len(), programs.len());
    assert!(rows.len() >= 80, "{} rows", rows.len());
    let header = stdout(&csv).lines().next().unwrap().to_owned();
    assert!(
        header.starts_with(
            "file_name,prog_name,verdict,duration,total_insns,total_states,peak_states"
        ),
        "{header}"
    );
    for (row, p) in rows.iter().zip(programs) {
        assert_eq!(row["file_name"], p["object"].as_str().unwrap());
        assert_eq!(row["prog_name"], p["name"].as_str().unwrap());
        let word = match p["verdict"].as_str().unwrap() {
            "accepted" => "success",
            "rejected" => "failure",
            other => other,
        };
        assert_eq!(row["verdict"], word, "{p}");
        assert_eq!(row["total_insns"], p["processed_insns"].to_string(), "{p}");
        assert_eq!(row["total_states"], p["total_states"].to_string(), "{p}");
        assert_eq!(row["peak_states"], p["peak_states"].to_string(), "{p}");
    }
    // Every object of the corpus directories, and nothing else, was judged.
    let objects: Vec<String> = CORPUS
        .iter()
        .flat_map(|d| std::fs::read_dir(root().join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .map(|p| p.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    let judged: Vec<&str> = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(judged.len(), objects.len());
    assert!(objects.iter().all(|o| judged.contains(&o.as_str())));
    // The table: one row per program under veristat's headers, then the counts.
    let table = bpfemu(&["verify", CORPUS[0], CORPUS[1]]);
    let text = stdout(&table);
    assert!(
        text.contains("File") && text.contains("Duration (us)") && text.contains("Peak states")
    );
    assert!(
        text.trim_end()
            .lines()
            .last()
            .unwrap()
            .ends_with(&format!("in {} objects", objects.len())),
        "{text}"
    );
}

/// An object that cannot be read among good ones: its one-line error, the others still
/// judged, exit 2 (when nothing is rejected).
#[test]
fn a_bad_object_among_good_ones_is_named_and_fails_the_run() {
    let scratch = Scratch::new("verify-bad-among-good");
    let bad = scratch.path("truncated.o");
    std::fs::write(&bad, b"\x7fELF\x02\x01").unwrap();
    let good = "examples/xdp/build/pass.v3.o";
    let out = bpfemu(&["verify", good, &bad, "--csv"]);
    assert_exit(&out, 2);
    assert_eq!(csv_rows(&stdout(&out)).len(), 1);
    let err = stderr(&out);
    assert!(err.starts_with(&format!("bpfemu: {bad}")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The CSV columns mean what the kernel's statistics mean: where bpfemu walks as many
/// instructions as the kernel, its states and peak states are the kernel's too (a column
/// holding another statistic would differ).
#[test]
fn the_columns_hold_the_kernels_statistics() {
    if !kernel_or_skip("the_columns_hold_the_kernels_statistics") {
        return;
    }
    let csv = bpfemu(&["verify", CORPUS[0], "--csv"]);
    let rows = csv_rows(&stdout(&csv));
    let mut compared = 0;
    let mut objects: Vec<&str> = rows.iter().map(|r| r["file_name"].as_str()).collect();
    objects.dedup();
    for object in objects {
        let out = bpfemu(&["diff", "--verifier", object, "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        for p in doc["programs"].as_array().unwrap() {
            let Some(stats) = p["kernel"]["stats"].as_str() else {
                continue;
            };
            let kernel = kernel_stats(stats);
            let row = rows
                .iter()
                .find(|r| r["file_name"] == object && r["prog_name"] == p["program"])
                .expect("a row for every program");
            if row["total_insns"] != kernel["total_insns"] {
                continue;
            }
            for column in ["total_states", "peak_states", "max_states_per_insn"] {
                assert_eq!(row[column], kernel[column], "{object} {column}: {stats}");
            }
            compared += 1;
        }
    }
    assert!(compared >= 30, "{compared} programs compared");
}

/// `processed N insns (limit L) max_states_per_insn M total_states T peak_states P ...`.
fn kernel_stats(line: &str) -> BTreeMap<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut stats = BTreeMap::new();
    stats.insert("total_insns".to_owned(), words[1].to_owned());
    for pair in words.windows(2) {
        if ["max_states_per_insn", "total_states", "peak_states"].contains(&pair[0]) {
            stats.insert(pair[0].to_owned(), pair[1].to_owned());
        }
    }
    stats
}

/// Compare mode: the default fails on a verdict change only; `--fail-on` thresholds fail
/// past their limit and not before; veristat's own CSV (base names, its full column set)
/// is read as the baseline.
#[test]
fn comparisons_fail_on_the_thresholds_set() {
    let scratch = Scratch::new("verify-compare");
    let objects = [
        "examples/xdp/build/firewall.v3.o",
        "examples/xdp/build/l4lb.v3.o",
    ];
    let out = bpfemu(&["verify", objects[0], objects[1], "--csv"]);
    assert_exit(&out, 0);
    let base = stdout(&out);
    let base_path = scratch.path("base.csv");
    std::fs::write(&base_path, &base).unwrap();

    // The same run again: nothing crossed, whatever the rule.
    let out = bpfemu(&[
        "verify",
        objects[0],
        objects[1],
        "--baseline",
        &base_path,
        "--fail-on",
        "insns>+0%,states>+0,verdict,programs",
    ]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("no threshold crossed"),
        "{}",
        stdout(&out)
    );

    // A baseline where firewall's program took a fifth fewer instructions.
    let rows = csv_rows(&base);
    let insns: i64 = rows[0]["total_insns"].parse().unwrap();
    let smaller = insns * 4 / 5;
    let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
    lines[1] = lines[1].replace(&format!(",{insns},"), &format!(",{smaller},"));
    let old_path = scratch.path("old.csv");
    std::fs::write(&old_path, lines.join("\n") + "\n").unwrap();
    let compare = |rules: &[&str]| {
        let mut args = vec!["verify", "--compare", &old_path, &base_path];
        for r in rules {
            args.extend(["--fail-on", r]);
        }
        bpfemu(&args)
    };
    assert_exit(&compare(&[]), 0);
    assert_exit(&compare(&["insns>+30%"]), 0);
    let out = compare(&["insns>+20%"]);
    assert_exit(&out, 1);
    let who = format!("{}/{}", rows[0]["file_name"], rows[0]["prog_name"]);
    assert!(
        stdout(&out).contains(&format!("{who}: insns {smaller} -> {insns}")),
        "{}",
        stdout(&out)
    );
    assert_exit(&compare(&[&format!("insns>+{}", insns - smaller)]), 0);
    assert_exit(&compare(&[&format!("insns>+{}", insns - smaller - 1)]), 1);

    // veristat's CSV: its columns, base names, success/failure; the new run rejects nothing
    // veristat accepted, and l4lb failed there: a verdict change.
    let veristat = format!(
        "file_name,prog_name,verdict,duration,total_insns,total_states,peak_states,\
         max_states_per_insn,max_mark_read_len,prog_size,prog_size_jited,prog_type,\
         attach_type,stack_depth,max_stack_depth,mem_peak\n\
         firewall.v3.o,{},success,100,{insns},1,1,1,0,10,100,xdp,xdp,0,0,0\n\
         l4lb.v3.o,{},failure,100,10,1,1,1,0,10,100,xdp,xdp,0,0,0\n",
        rows[0]["prog_name"], rows[1]["prog_name"],
    );
    let veristat_path = scratch.path("veristat.csv");
    std::fs::write(&veristat_path, veristat).unwrap();
    let out = bpfemu(&["verify", "--compare", &veristat_path, &base_path]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains(&format!(
            "{}/{}: verdict rejected -> accepted",
            rows[1]["file_name"], rows[1]["prog_name"]
        )),
        "{}",
        stdout(&out)
    );
    // A rule that names nothing bpfemu knows is bad input.
    let out = compare(&["cycles>+1%"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("unknown statistic 'cycles'"),
        "{}",
        stderr(&out)
    );
}

fn check_format(kind: &str, path: &str) -> serde_json::Value {
    let out = Command::new(python())
        .args([
            root().join("scripts/check_ci_formats.py").to_str().unwrap(),
            kind,
            path,
        ])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{kind} {path} does not validate: {}",
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out)).expect("the checker prints JSON")
}

/// The SARIF file validates against the SARIF 2.1.0 schema; each rejected program is one
/// result of the rule of its kind, at the source line the text report names, in a file that
/// exists from the repository's root (where code scanning looks).
#[test]
fn sarif_validates_and_points_at_the_source() {
    let scratch = Scratch::new("verify-sarif");
    let sarif = scratch.path("out.sarif");
    let out = bpfemu(&["verify", CORPUS[1], "--sarif", &sarif, "--json"]);
    assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rejected: Vec<&serde_json::Value> = doc["programs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["verdict"] == "rejected")
        .collect();
    let checked = check_format("sarif", &sarif);
    let results = checked["results"].as_array().unwrap();
    assert_eq!(results.len(), rejected.len());
    for (result, p) in results.iter().zip(&rejected) {
        assert_eq!(result["ruleId"], result["ruleIndexId"]);
        assert_eq!(result["level"], "error");
        let message = format!(
            "{}: {}",
            p["name"].as_str().unwrap(),
            p["message"].as_str().unwrap()
        );
        assert_eq!(result["message"], message);
        let uri = result["uri"].as_str().unwrap();
        assert!(root().join(uri).is_file(), "{uri}");
        assert_eq!(result["line"], p["source"]["line"], "{p}");
    }
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap())
        .collect();
    for kind in ["packet-bounds", "null-check", "reference-leak"] {
        assert!(ids.contains(&kind), "{kind}: {ids:?}");
    }
}

/// The JUnit file parses with junitparser: one suite per object, one case per program, a
/// failure for each rejection carrying the kernel's message.
#[test]
fn junit_parses_with_a_junit_reader() {
    let scratch = Scratch::new("verify-junit");
    let junit = scratch.path("out.xml");
    let out = bpfemu(&["verify", CORPUS[1], "--junit", &junit, "--json"]);
    assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let read = check_format("junit", &junit);
    let suites = read["suites"].as_array().unwrap();
    assert_eq!(suites.len(), doc["objects"].as_array().unwrap().len());
    let cases: Vec<&serde_json::Value> = suites
        .iter()
        .flat_map(|s| s["cases"].as_array().unwrap())
        .collect();
    let programs = doc["programs"].as_array().unwrap();
    let not_verified = doc["not_verified"].as_array().unwrap();
    assert_eq!(cases.len(), programs.len() + not_verified.len());
    for p in programs {
        let case = cases
            .iter()
            .find(|c| c["classname"] == p["object"] && c["name"] == p["name"])
            .unwrap_or_else(|| panic!("no case for {p}"));
        match p["verdict"].as_str().unwrap() {
            "accepted" => assert_eq!(case["outcome"], "passed"),
            "rejected" => {
                assert_eq!(case["outcome"], "failure");
                assert_eq!(case["message"], p["message"]);
            }
            _ => assert_eq!(case["outcome"], "error"),
        }
    }
    let failures: u64 = suites.iter().map(|s| s["failures"].as_u64().unwrap()).sum();
    assert_eq!(failures, doc["summary"]["rejected"].as_u64().unwrap());
}

/// Under GitHub Actions, each rejection is an `::error` workflow command at its source
/// line; read back with the runner's rules (properties split on `,` and `=`, then
/// `%2C`, `%3A`, `%0A`, `%0D`, `%25` decoded), it names an existing file, the line and
/// column of the text report, and carries the placed error.
#[test]
fn github_annotations_point_at_the_source_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(["verify", "tests/data/verify/unchecked_read.o"])
        .current_dir(root())
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let text = stdout(&out);
    let commands: Vec<&str> = text.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(commands.len(), 1, "{text}");
    let (level, props, message) = parse_command(commands[0]);
    assert_eq!(level, "error");
    assert_eq!(props["file"], "tests/data/verify/unchecked_read.c");
    assert!(root().join(&props["file"]).is_file());
    assert_eq!(props["line"], "19");
    assert_eq!(props["col"], "14");
    assert!(props["title"].contains("xdp_unchecked"), "{props:?}");
    assert!(
        message
            .starts_with("./unchecked_read.c:19:14: error: R1 offset is outside of the packet\n"),
        "{message}"
    );
    // Without the runner's variable, no commands.
    let plain = bpfemu(&["verify", "tests/data/verify/unchecked_read.o"]);
    assert!(!stdout(&plain).contains("::error"));
    // With a JSON report on standard output, the commands go to standard error.
    let json = Command::new(env!("CARGO_BIN_EXE_bpfemu"))
        .args(["verify", "tests/data/verify/unchecked_read.o", "--json"])
        .current_dir(root())
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&json.stdout).expect("pure JSON");
    assert!(
        stderr(&json).starts_with("::error file="),
        "{}",
        stderr(&json)
    );
}

/// `::LEVEL k=v,k=v::message`, unescaped as the Actions runner unescapes.
fn parse_command(line: &str) -> (String, BTreeMap<String, String>, String) {
    let rest = line.strip_prefix("::").unwrap();
    let (head, message) = rest.split_once("::").unwrap();
    let (level, props) = head.split_once(' ').unwrap_or((head, ""));
    let unescape = |s: &str| {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    let props = props
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.to_owned(), unescape(v))
        })
        .collect();
    (level.to_owned(), props, unescape(message))
}
