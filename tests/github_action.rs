//! The GitHub Action (`action.yml`) run as a workflow runs it: its verify step's script with
//! the inputs as `INPUT_*` variables and the runner's files for outputs and the step summary,
//! its install step on a cache hit; the manifest's wiring; and the pre-commit hook manifest,
//! checked by pre-commit itself.

#[allow(dead_code)]
mod cli_support;

use cli_support::{Scratch, python, root, stderr, stdout};
use std::path::Path;
use std::process::{Command, Output};

/// The directory of the bpfemu binary under test, first on PATH as the install step puts it.
fn path_with_bpfemu() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_bpfemu")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// action/verify.sh as the Verify step runs it, from the repository's root.
fn verify_step(scratch: &Scratch, inputs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(root().join("action/verify.sh"));
    cmd.current_dir(root())
        .env("PATH", path_with_bpfemu())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", scratch.path("github_output"))
        .env("GITHUB_STEP_SUMMARY", scratch.path("step_summary"));
    for (name, value) in inputs {
        cmd.env(format!("INPUT_{name}"), value);
    }
    cmd.output().expect("the step runs")
}

fn outputs(scratch: &Scratch) -> Vec<String> {
    std::fs::read_to_string(scratch.path("github_output"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_verify_step_reports_fails_and_writes_its_files() {
    let scratch = Scratch::new("action-rejected");
    let sarif = scratch.path("bpfemu.sarif");
    let junit = scratch.path("junit.xml");
    let out = verify_step(
        &scratch,
        &[
            (
                "OBJECTS",
                "tests/data/verify/**/*.o\nexamples/xdp/build/pass.v3.o",
            ),
            ("SARIF", &sarif),
            ("JUNIT", &junit),
            ("ARGS", "--log-level 0"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(
        outputs(&scratch),
        [format!("sarif={sarif}"), "exit-code=1".into()]
    );
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l
                .starts_with("::error file=tests/data/verify/unchecked_read.c,line=19,col=14,")),
        "{text}"
    );
    let summary = std::fs::read_to_string(scratch.path("step_summary")).unwrap();
    assert!(
        summary.contains("pass.v3.o") && summary.contains("rejected"),
        "{summary}"
    );
    assert!(!summary.contains("::error"), "{summary}");
    // The files the upload step and a test reporter read are there and parse.
    for (kind, file) in [("sarif", &sarif), ("junit", &junit)] {
        let checked = Command::new(python())
            .args([
                root().join("scripts/check_ci_formats.py").to_str().unwrap(),
                kind,
                file,
            ])
            .output()
            .unwrap();
        assert!(checked.status.success(), "{kind}: {}", stderr(&checked));
    }
}

#[test]
fn accepted_objects_pass_and_a_baseline_threshold_fails() {
    let scratch = Scratch::new("action-accepted");
    let object = "examples/xdp/build/firewall.v3.o";
    let csv = scratch.path("base.csv");
    let out = verify_step(
        &scratch,
        &[("OBJECTS", object), ("CSV", &csv), ("SARIF", "")],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(outputs(&scratch), ["exit-code=0"]);
    // Next run against that baseline, with a threshold the same program cannot cross...
    let out = verify_step(
        &scratch,
        &[
            ("OBJECTS", object),
            ("BASELINE", &csv),
            ("FAIL_ON", "insns>+0"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // ...and with a baseline in which it took one instruction fewer.
    let base = std::fs::read_to_string(&csv).unwrap();
    let insns: i64 = base
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .nth(4)
        .unwrap()
        .parse()
        .unwrap();
    let lower = base.replacen(&format!(",{insns},"), &format!(",{},", insns - 1), 1);
    std::fs::write(&csv, lower).unwrap();
    let out = verify_step(
        &scratch,
        &[
            ("OBJECTS", object),
            ("BASELINE", &csv),
            ("FAIL_ON", "insns>+0"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("(fails insns>+0)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_glob_that_matches_nothing_fails_the_step() {
    let scratch = Scratch::new("action-nothing");
    let out = verify_step(&scratch, &[("OBJECTS", "build/**/*.bpf.o")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).contains("::error title=bpfemu verify::'build/**/*.bpf.o' matches no file"),
        "{}",
        stdout(&out)
    );
    let out = verify_step(&scratch, &[("OBJECTS", "")]);
    assert_eq!(out.status.code(), Some(2));
}

/// A cache hit: the install step builds nothing and puts the cached binary on PATH.
#[test]
fn the_install_step_uses_the_cached_binary() {
    let scratch = Scratch::new("action-install");
    let bin = scratch.dir().join("cache/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_bpfemu"), bin.join("bpfemu")).unwrap();
    let out = Command::new(root().join("action/install.sh"))
        .env("BPFEMU_INSTALL_ROOT", scratch.dir().join("cache"))
        .env("GITHUB_ACTION_PATH", root())
        .env("GITHUB_PATH", scratch.path("github_path"))
        // No cargo: a build attempt would fail the step.
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let path = std::fs::read_to_string(scratch.path("github_path")).unwrap();
    assert_eq!(path.trim(), bin.display().to_string());
}

/// action.yml's steps run scripts that exist, and pass every input the verify script reads;
/// the pre-commit manifest is valid for pre-commit and runs `bpfemu verify`.
#[test]
fn the_manifests_are_wired() {
    let check = r#"
import json, sys, yaml
action = yaml.safe_load(open("action.yml"))
steps = action["runs"]["steps"]
print(json.dumps({
    "inputs": sorted(action["inputs"]),
    "runs": [s.get("run", "") for s in steps],
    "env": sorted((steps[2].get("env") or {}).items()),
    "hooks": yaml.safe_load(open(".pre-commit-hooks.yaml")),
}))
"#;
    let out = Command::new(python())
        .args(["-c", check])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for run in doc["runs"].as_array().unwrap() {
        let Some(script) = run
            .as_str()
            .and_then(|r| r.split("$GITHUB_ACTION_PATH/").nth(1))
        else {
            continue;
        };
        let script = script.trim_end_matches('"');
        assert!(root().join(script).is_file(), "{script}");
    }
    let verify_script = std::fs::read_to_string(root().join("action/verify.sh")).unwrap();
    let inputs: Vec<&str> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for pair in doc["env"].as_array().unwrap() {
        let (var, value) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        assert!(verify_script.contains(var), "{var} is set but not read");
        let input = value
            .trim_start_matches("${{ inputs.")
            .trim_end_matches(" }}");
        assert!(inputs.contains(&input), "{var}: no input {input}");
    }
    for used in verify_script.match_indices("INPUT_").map(|(i, _)| {
        verify_script[i..]
            .split(|c: char| !c.is_ascii_uppercase() && c != '_')
            .next()
            .unwrap()
    }) {
        if used == "INPUT_" {
            continue; // the comment's `INPUT_*`
        }
        assert!(
            doc["env"].as_array().unwrap().iter().any(|p| p[0] == used),
            "{used} is read but never set"
        );
    }
    assert_eq!(doc["hooks"][0]["entry"], "bpfemu verify");
    let validate = Command::new(python())
        .args([
            "-m",
            "pre_commit",
            "validate-manifest",
            ".pre-commit-hooks.yaml",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "{}{}",
        stdout(&validate),
        stderr(&validate)
    );
}
