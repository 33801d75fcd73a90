//! `bpfemu test`: the corpus's test files pass (in bpfemu, and in the running kernel with
//! `--kernel`), a wrong expectation fails with a difference by layer and field, `--bless`
//! round-trips, JUnit output reads in a real JUnit reader, bad input exits 2.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, assert_exit, bpfemu, kernel_or_skip, python, root, stderr, stdout};
use std::path::{Path, PathBuf};

/// The corpus's test files, sorted.
fn corpus_files() -> Vec<PathBuf> {
    let dir = root().join("tests/data/test-files");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// How many `[[test]]` tables the files hold.
fn count_tests(files: &[PathBuf]) -> usize {
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines().filter(|l| l.trim() == "[[test]]").count()
        })
        .sum()
}

fn args(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|f| f.display().to_string()).collect()
}

/// A test file in `dir` whose object paths point into the repository's corpus.
fn write_test_file(dir: &Scratch, name: &str, text: &str) -> String {
    let corpus = root().join("examples").display().to_string();
    let path = dir.path(name);
    std::fs::write(&path, text.replace("EXAMPLES", &corpus)).unwrap();
    path
}

#[test]
fn every_corpus_program_has_a_test_file() {
    let files: Vec<String> = corpus_files()
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let sources = std::fs::read_dir(root().join("examples/xdp")).unwrap();
    for source in sources.map(|e| e.unwrap().path()) {
        if source.extension().is_some_and(|e| e == "c") {
            let stem = source.file_stem().unwrap().to_string_lossy().into_owned();
            assert!(
                files.contains(&stem),
                "no tests/data/test-files/{stem}.toml"
            );
        }
    }
}

#[test]
fn the_corpus_test_files_pass() {
    let files = corpus_files();
    let mut argv = vec!["test".to_owned()];
    argv.extend(args(&files));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = bpfemu(&argv);
    assert_exit(&out, 0);
    let n = count_tests(&files);
    assert!(n >= 60, "only {n} tests");
    let text = stdout(&out);
    assert!(
        text.contains(&format!("test result: ok. {n} passed; 0 failed")),
        "{text}"
    );
    assert_eq!(text.matches(" ... ok\n").count(), n, "{text}");
}

#[test]
fn the_corpus_test_files_pass_in_the_kernel_too() {
    if !kernel_or_skip("the_corpus_test_files_pass_in_the_kernel_too") {
        return;
    }
    let files = corpus_files();
    let mut argv = vec!["test".to_owned(), "--kernel".to_owned()];
    argv.extend(args(&files));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = bpfemu(&argv);
    assert_exit(&out, 0);
    let n = count_tests(&files);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("test result: ok. {n} passed; 0 failed")),
        "{text}"
    );
    // Only the tests that say why skip the kernel.
    let skipped = text.matches("kernel skipped:").count();
    let declared: usize = files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .matches("\nkernel_skip = ")
                .count()
        })
        .sum();
    assert_eq!(skipped, declared, "{text}");
}

const WRONG: &str = r#"
# A comment that --bless keeps.
[[test]]
name = "reflected_udp"
object = "EXAMPLES/xdp/build/reflector.v3.o"
packet = { ipv4 = { ttl = 64 }, udp = { dport = 9999 }, payload_text = "x" }

[test.expect]
action = "pass"
output = { eth = { dst = "02:00:00:00:00:0a" }, ipv4 = { ttl = 63, src = "198.51.100.2" } }

[test.expect.maps]
proto_count = [{ key = 17, value = 2 }]

[[test]]
name = "dropped_tcp"
object = "EXAMPLES/xdp/build/reflector.v3.o"
packet = { ipv4 = {}, tcp = {} }

[test.expect]
action = "drop"
"#;

#[test]
fn a_wrong_expectation_fails_with_the_difference_by_layer_and_field() {
    let dir = Scratch::new("test-wrong");
    let file = write_test_file(&dir, "wrong.toml", WRONG);
    let out = bpfemu(&["test", &file]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("test {file}::reflected_udp ... FAILED")),
        "{text}"
    );
    assert!(
        text.contains(&format!("test {file}::dropped_tcp ... ok")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}:3: test `reflected_udp` failed:")),
        "{text}"
    );
    for line in [
        "  action: expected pass, got tx",
        "  ipv4.ttl: expected 63, got 64",
        "  ipv4.src: expected 198.51.100.2, got 198.51.100.1",
        "  maps.proto_count[17]: expected 2, got 1",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    // The MACs were swapped: the destination is the sender's, as expected.
    assert!(!text.contains("eth.dst"), "{text}");
    assert!(
        text.contains("test result: FAILED. 1 passed; 1 failed"),
        "{text}"
    );

    // Exact bytes that differ in one field are reported by that field, not as a dump.
    let exact = WRONG.replace(
        r#"output = { eth = { dst = "02:00:00:00:00:0a" }, ipv4 = { ttl = 63, src = "198.51.100.2" } }"#,
        &format!("output = \"{}\"", expected_reflection_with_ttl(9)),
    );
    let file = write_test_file(&dir, "exact.toml", &exact);
    let text = stdout(&bpfemu(&["test", &file]));
    assert!(text.contains("  ipv4.ttl: expected 9, got 64"), "{text}");
    assert!(text.contains("  ipv4.checksum: expected 0x"), "{text}");
}

/// The frame the reflector sends back for WRONG's first packet, with another TTL.
fn expected_reflection_with_ttl(ttl: u64) -> String {
    let spec = serde_json::json!({
        "eth": {"src": "02:00:00:00:00:0b", "dst": "02:00:00:00:00:0a"},
        "ipv4": {"ttl": ttl},
        "udp": {"dport": 9999},
        "payload_text": "x"
    });
    let frame = bpfemu::layers::build::build(spec.as_object().unwrap()).unwrap();
    bpfemu::replay::hex(&frame)
}

#[test]
fn bless_writes_what_came_out_and_round_trips() {
    let dir = Scratch::new("test-bless");
    let file = write_test_file(&dir, "wrong.toml", WRONG);
    let out = bpfemu(&["test", "--bless", &file]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("::reflected_udp ... ok (blessed)"),
        "{}",
        stdout(&out)
    );
    let blessed = std::fs::read_to_string(&file).unwrap();
    // What came out, in the shape the test had; the rest of the file as it was.
    assert!(
        blessed.contains("# A comment that --bless keeps."),
        "{blessed}"
    );
    assert!(blessed.contains("action = \"tx\""), "{blessed}");
    assert!(
        blessed.contains(r#"output = { eth = { dst = "02:00:00:00:00:0a" }, ipv4 = { ttl = 64, src = "198.51.100.1" } }"#),
        "{blessed}"
    );
    assert!(blessed.contains("{ key = 17, value = 1 }"), "{blessed}");
    // The passing test is left exactly as written.
    let tail = |text: &str| text[text.find("name = \"dropped_tcp\"").unwrap()..].to_owned();
    assert_eq!(
        tail(&blessed),
        tail(&WRONG.replace("EXAMPLES", "")).replace(
            "object = \"/xdp",
            &format!("object = \"{}/xdp", root().join("examples").display())
        )
    );
    assert_exit(&bpfemu(&["test", &file]), 0);
    assert_exit(&bpfemu(&["test", "--bless", &file]), 0);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        blessed,
        "a second --bless changed the file"
    );

    // A corpus file with its expectations stripped comes back as committed.
    let original = root().join("tests/data/test-files/reflector.toml");
    let committed = std::fs::read_to_string(&original).unwrap();
    let stripped = strip_expectations(&committed);
    assert!(!stripped.contains("[test.expect]"));
    let copy = dir.path("reflector.toml");
    let local = |text: &str| {
        text.replace(
            "../../../examples",
            &root().join("examples").display().to_string(),
        )
    };
    std::fs::write(&copy, local(&stripped)).unwrap();
    assert_exit(&bpfemu(&["test", &copy]), 2); // expects nothing: not a pass
    assert_exit(&bpfemu(&["test", "--bless", &copy]), 0);
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), local(&committed));
}

/// The file without its `[test.expect]` and `[test.expect.maps]` tables.
fn strip_expectations(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with('[') {
            skipping = line.starts_with("[test.expect");
            // The blank line before a table belongs to it.
            if skipping && out.ends_with("\n\n") {
                out.pop();
            }
        }
        // Blank lines stay (the one before `[[test]]` is the next test's), unless a
        // `[test.expect...]` header follows.
        if !skipping || line.trim().is_empty() {
            out.push_str(line);
        }
    }
    out
}

#[test]
fn junit_output_reads_in_a_junit_reader() {
    let dir = Scratch::new("test-junit");
    let file = write_test_file(&dir, "wrong.toml", WRONG);
    let xml = dir.path("report.xml");
    let out = bpfemu(&[
        "test",
        "--junit",
        &xml,
        &file,
        &root()
            .join("tests/data/test-files/pass.toml")
            .display()
            .to_string(),
    ]);
    assert_exit(&out, 1);
    let python = python();
    let script = r#"
import sys
from junitparser import JUnitXml, Failure
xml = JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    for case in suite:
        kinds = [type(r).__name__ for r in case.result]
        message = case.result[0].message if case.result else ""
        print(f"{suite.name.split('/')[-1]}|{case.classname.split('/')[-1]}|{case.name}|{','.join(kinds)}|{message}")
print("totals", xml.tests, xml.failures, xml.errors)
"#;
    let run = std::process::Command::new(python)
        .args(["-c", script, &xml])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8_lossy(&run.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "wrong.toml|wrong.toml|reflected_udp|Failure|action: expected pass, got tx",
            "wrong.toml|wrong.toml|dropped_tcp||",
            "pass.toml|pass.toml|an_ipv4_frame_passes_unchanged||",
            "pass.toml|pass.toml|a_bare_ethernet_header_passes||",
            "totals 4 1 0",
        ],
        "{text}"
    );
}

#[test]
fn tap_and_json_reports() {
    let dir = Scratch::new("test-tap");
    let file = write_test_file(&dir, "wrong.toml", WRONG);
    let out = bpfemu(&["test", "--tap", &file]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(text.starts_with("TAP version 13\n1..2\n"), "{text}");
    assert!(
        text.contains(&format!("not ok 1 - {file}::reflected_udp\n")),
        "{text}"
    );
    assert!(
        text.contains("#   ipv4.ttl: expected 63, got 64\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("ok 2 - {file}::dropped_tcp\n")),
        "{text}"
    );

    let out = bpfemu(&["test", "--json", &file]);
    assert_exit(&out, 1);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["summary"]["passed"], 1);
    assert_eq!(doc["summary"]["failed"], 1);
    assert_eq!(doc["tests"][0]["outcome"], "failed");
    assert_eq!(doc["tests"][0]["line"], 3);
    assert!(
        doc["tests"][0]["problems"]
            .as_array()
            .unwrap()
            .contains(&"ipv4.ttl: expected 63, got 64".into())
    );
}

#[test]
fn bad_input_exits_2_naming_the_file_and_line() {
    let dir = Scratch::new("test-bad");
    let cases = [
        (
            "[[test]]\nname = \"t\"\nobject = \"EXAMPLES/xdp/build/pass.v3.o\"\npacket = { ipv4 = { tll = 3 } }\nexpect = { action = \"pass\" }\n",
            ":1: test `t`: packet: ipv4: unknown field `tll`",
        ),
        (
            "[[test]]\nname = \"t\"\nobject = \"EXAMPLES/xdp/build/pass.v3.o\"\npacket = { hex = \"0011\" }\n[test.expect]\nacton = \"pass\"\n",
            ":1: test `t`: unknown key `expect.acton`",
        ),
        ("\n\n[[test]\n", ":3: "),
        (
            "[[test]]\nname = \"t\"\nobject = \"EXAMPLES/xdp/build/pass.v3.o\"\npacket = { hex = \"02000000000b02000000000a0800\" }\n",
            ":1: test `t` expects nothing",
        ),
        (
            "[[test]]\nname = \"t\"\nobject = \"EXAMPLES/xdp/build/missing.o\"\npacket = { hex = \"02000000000b02000000000a0800\" }\nexpect = { action = \"pass\" }\n",
            "missing.o",
        ),
    ];
    for (i, (text, wanted)) in cases.iter().enumerate() {
        let file = write_test_file(&dir, &format!("bad{i}.toml"), text);
        let out = bpfemu(&["test", &file]);
        assert_exit(&out, 2);
        assert!(
            stdout(&out).contains(wanted),
            "case {i}: no `{wanted}` in\n{}",
            stdout(&out)
        );
    }
    let out = bpfemu(&["test", &dir.path("absent.toml")]);
    assert_exit(&out, 2);
}

#[test]
fn a_program_the_verifier_rejects_fails_with_its_message() {
    let dir = Scratch::new("test-rejected");
    let object = root().join("tests/data/verify/unchecked_read.o");
    let text = format!(
        "[[test]]\nname = \"t\"\nobject = \"{}\"\nprogram = \"xdp_unchecked\"\npacket = {{ ipv4 = {{}} }}\nexpect = {{ action = \"pass\" }}\n",
        object.display()
    );
    let file = dir.path("rejected.toml");
    std::fs::write(&file, text).unwrap();
    let out = bpfemu(&["test", &file]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains("error: R1 offset is outside of the packet"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("the verifier rejects program xdp_unchecked"),
        "{}",
        stdout(&out)
    );
    let _ = (stderr(&out), Path::new("."));
}

#[test]
fn the_readme_example_passes() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("### Unit tests for XDP programs").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    assert!(example.lines().count() <= 10, "{example}");
    // Its object path is relative to a file one level below the repository's root.
    let file = root().join(format!("target/readme-example-{}.toml", std::process::id()));
    std::fs::write(&file, example).unwrap();
    let out = bpfemu(&["test", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("test result: ok. 1 passed; 0 failed"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_corpus_test_files_pass_in_the_other_engines() {
    let files = corpus_files();
    let n = count_tests(&files);
    for engine in ["interp", "jit-baseline"] {
        let mut argv = vec!["test".to_owned(), "--engine".to_owned(), engine.to_owned()];
        argv.extend(args(&files));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = bpfemu(&argv);
        assert_exit(&out, 0);
        assert!(
            stdout(&out).contains(&format!("test result: ok. {n} passed; 0 failed")),
            "{engine}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn filter_runs_the_tests_it_names_and_none_is_no_pass() {
    let file = root()
        .join("tests/data/test-files/firewall.toml")
        .display()
        .to_string();
    let out = bpfemu(&["test", "--filter", "deny", &file]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.matches(" ... ok\n").count(), 2, "{text}");
    assert!(text.contains("::an_exact_deny_rule_drops ... ok"), "{text}");
    let out = bpfemu(&["test", "--filter", "no test has this name", &file]);
    assert_exit(&out, 2);
}

/// A test file's `sockets` table: the socket lookups of `tests/data/sockets/sk_lookup.o`
/// find its sockets in bpfemu (each engine) and, with `--kernel`, the same sockets opened for real in the
/// kernel side's namespace, with the expectations of the file either way.
#[test]
fn a_socket_table_in_a_test_file_holds_in_bpfemu_and_the_kernel() {
    let file = root().join("tests/data/sockets/sk_lookup.toml");
    let file = file.to_str().unwrap();
    // Every engine reads the sockets' `struct bpf_sock` (the trusted ones from host memory).
    for engine in [
        "interp",
        "jit",
        "jit-trusted",
        "jit-baseline",
        "jit-baseline-checked",
    ] {
        let out = bpfemu(&["test", "--engine", engine, file]);
        assert_exit(&out, 0);
        let text = stdout(&out);
        assert!(
            text.contains("test result: ok. 4 passed; 0 failed"),
            "{engine}: {text}"
        );
    }
    if !kernel_or_skip("a_socket_table_in_a_test_file_holds_in_bpfemu_and_the_kernel") {
        return;
    }
    let out = bpfemu(&["test", "--kernel", file]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("test result: ok. 4 passed; 0 failed"),
        "{text}"
    );
    assert!(!text.contains("kernel skipped"), "{text}");
}
