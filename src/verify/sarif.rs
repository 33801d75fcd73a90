//! SARIF 2.1.0, the format GitHub code scanning and other static-analysis viewers read: one
//! result per rejected (or undecided) program at its source line, one rule per kind of error.

use super::batch::{Batch, ProgramResult};
use super::kinds::{KINDS, Kind, OTHER};
use super::table::RowVerdict;
use serde_json::{Value, json};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The SARIF log of a batch.
pub fn render(batch: &Batch) -> Value {
    let rules: Vec<Value> = KINDS.iter().chain([&OTHER]).map(rule).collect();
    let rule_index = |kind: &Kind| {
        KINDS
            .iter()
            .position(|k| k.id == kind.id)
            .unwrap_or(KINDS.len())
    };
    let mut results: Vec<Value> = batch
        .programs
        .iter()
        .filter_map(|p| result(p, rule_index))
        .collect();
    results.extend(batch.failures.iter().map(|f| {
        json!({
            "ruleId": "load",
            "level": "error",
            "message": { "text": f.error },
            "locations": [ { "physicalLocation": {
                "artifactLocation": { "uri": uri(&f.file), "uriBaseId": "%SRCROOT%" }
            } } ],
        })
    }));
    let mut all_rules = rules;
    all_rules.push(json!({
        "id": "load",
        "name": "ObjectNotLoaded",
        "shortDescription": { "text": "The object could not be read as a BPF object." },
        "defaultConfiguration": { "level": "error" },
    }));
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [ {
            "tool": { "driver": {
                "name": "bpfemu",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": all_rules,
            } },
            "originalUriBaseIds": { "%SRCROOT%": { "description": {
                "text": "The directory bpfemu verify ran in."
            } } },
            "results": results,
        } ],
    })
}

fn rule(kind: &Kind) -> Value {
    let level = if kind.id == "undecided" {
        "warning"
    } else {
        "error"
    };
    json!({
        "id": kind.id,
        "name": kind.name,
        "shortDescription": { "text": kind.help },
        "defaultConfiguration": { "level": level },
    })
}

/// A path as a relative URI reference: `/` separators, and the characters a URI cannot hold
/// as they are percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'.'
            | b'_'
            | b'~'
            | b'/'
            | b'+'
            | b'@' => out.push(b as char),
            b'\\' => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out.trim_start_matches("./").to_owned()
}

fn result(p: &ProgramResult, rule_index: impl Fn(&Kind) -> usize) -> Option<Value> {
    let r = p.rejection.as_ref()?;
    let level = match p.verdict {
        RowVerdict::Undecided => "warning",
        _ => "error",
    };
    let text = format!("{}: {}", p.name, r.message);
    let location = match (&r.source, &r.source_path) {
        (Some(src), Some(path)) => {
            let mut region = json!({ "startLine": src.line.max(1) });
            if src.column > 0 {
                region["startColumn"] = json!(src.column);
            }
            let text = src.line_text.trim_end();
            if !text.is_empty() {
                region["snippet"] = json!({ "text": text });
            }
            json!({ "physicalLocation": {
                "artifactLocation": { "uri": uri(path), "uriBaseId": "%SRCROOT%" },
                "region": region,
            } })
        }
        // No source to point at: the object itself, which is what was judged.
        _ => json!({ "physicalLocation": {
            "artifactLocation": { "uri": uri(&p.file), "uriBaseId": "%SRCROOT%" }
        } }),
    };
    let mut location = location;
    location["logicalLocations"] = json!([ {
        "name": p.name,
        "fullyQualifiedName": format!("{}:{}", p.file, p.name),
        "kind": "function",
    } ]);
    let mut result = json!({
        "ruleId": r.kind.id,
        "ruleIndex": rule_index(r.kind),
        "level": level,
        "message": { "text": text },
        "locations": [ location ],
        "properties": {
            "object": p.file,
            "section": p.section,
            "details": r.error_text,
        },
    });
    if let Some(insn) = r.insn {
        result["properties"]["insn"] = json!(insn);
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_relative_references() {
        assert_eq!(uri("./src/x y.c"), "src/x%20y.c");
        assert_eq!(uri("a/b#c.c"), "a/b%23c.c");
    }
}
