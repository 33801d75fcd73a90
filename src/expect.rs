//! Expectations for regression replay: `--record FILE` writes, per packet, the action, return
//! value and output bytes, and the final map contents; `--check FILE` replays and reports the
//! first packet (or map) that differs.

use crate::replay::ReplayOptions;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The format version; bumped when the file's meaning changes.
const FORMAT: u32 = 1;

/// What one packet is expected to give.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketExpectation {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retval: Option<u32>,
    /// Output bytes in hex, from data_meta to data_end (BPF_PROG_TEST_RUN's data_out).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub redirect: Option<String>,
    /// The packet was refused or its run stopped.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// A recorded replay.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Expectations {
    pub bpfemu_expectations: u32,
    /// File names, for the reader's orientation; the check does not require them to match.
    pub object: String,
    pub program: String,
    pub capture: String,
    pub options: RecordedOptions,
    pub packets: Vec<PacketExpectation>,
    pub maps: serde_json::Value,
}

/// The options that change results; a check warns when they differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedOptions {
    pub cpus: u32,
    pub seed: u64,
    pub ifindex: u32,
    pub rxq: Option<u32>,
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

impl Expectations {
    pub fn new(
        opts: &ReplayOptions,
        program: &str,
        packets: Vec<PacketExpectation>,
        maps: serde_json::Value,
    ) -> Expectations {
        Expectations {
            bpfemu_expectations: FORMAT,
            object: file_name(&opts.object),
            program: program.to_owned(),
            capture: file_name(&opts.capture),
            options: RecordedOptions {
                cpus: opts.cpus,
                seed: opts.seed,
                ifindex: opts.ifindex,
                rxq: opts.rxq,
            },
            packets,
            maps,
        }
    }

    pub fn load(path: &Path) -> Result<Expectations> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let exp: Expectations = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a bpfemu expectations file", path.display()))?;
        if exp.bpfemu_expectations != FORMAT {
            bail!(
                "{}: expectations format {} (this bpfemu reads {FORMAT})",
                path.display(),
                exp.bpfemu_expectations
            );
        }
        Ok(exp)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The difference between packet `got.index`'s expectation and what happened, if any.
    pub fn compare_packet(&self, got: &PacketExpectation) -> Option<String> {
        let Some(want) = self.packets.get(got.index) else {
            return Some(format!(
                "packet {}: not in the expectations, which stop after {} packets",
                got.index,
                self.packets.len()
            ));
        };
        (want != got).then(|| describe_difference(want, got))
    }

    /// Differences only visible at the end: packet count and map contents.
    pub fn compare_end(&self, packets: usize, maps: &serde_json::Value) -> Option<String> {
        if packets != self.packets.len() {
            return Some(format!(
                "the capture gave {packets} packets, the expectations hold {}",
                self.packets.len()
            ));
        }
        let expected = self.maps.as_object()?;
        let got = maps.as_object()?;
        for (name, want) in expected {
            match got.get(name) {
                None => {
                    return Some(format!(
                        "map {name}: expected, but the object has no such map"
                    ));
                }
                Some(have) if have != want => {
                    return Some(format!(
                        "map {name} differs after the replay:\n  expected: {want}\n  got:      {have}"
                    ));
                }
                Some(_) => {}
            }
        }
        None
    }
}

fn summary(p: &PacketExpectation) -> String {
    match &p.error {
        Some(e) => format!("error: {e}"),
        None => format!(
            "action {}, retval {}{}, {} bytes",
            p.action.as_deref().unwrap_or("?"),
            p.retval.map_or_else(|| "?".into(), |r| r.to_string()),
            p.redirect
                .as_ref()
                .map_or_else(String::new, |r| format!(", redirect {r}")),
            p.data.as_ref().map_or(0, |d| d.len() / 2),
        ),
    }
}

fn describe_difference(want: &PacketExpectation, got: &PacketExpectation) -> String {
    let mut text = format!(
        "packet {} differs:\n  expected: {}\n  got:      {}",
        want.index,
        summary(want),
        summary(got)
    );
    if let (Some(a), Some(b)) = (&want.data, &got.data)
        && a != b
    {
        text += &byte_difference(a, b);
    }
    text
}

/// Where two hex strings first differ, with a few bytes of context from each.
fn byte_difference(want: &str, got: &str) -> String {
    let (a, b) = (want.as_bytes(), got.as_bytes());
    let first = a
        .chunks(2)
        .zip(b.chunks(2))
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()) / 2);
    let window = |s: &str| {
        let start = (first * 2).min(s.len());
        let end = (start + 32).min(s.len());
        s[start..end].to_owned()
    };
    format!(
        "\n  first differing byte: {first}\n  expected from there: {}\n  got from there:      {}",
        window(want),
        window(got)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(index: usize, action: &str, data: &str) -> PacketExpectation {
        PacketExpectation {
            index,
            action: Some(action.into()),
            retval: Some(3),
            data: Some(data.into()),
            redirect: None,
            error: None,
        }
    }

    fn expectations(packets: Vec<PacketExpectation>) -> Expectations {
        Expectations {
            bpfemu_expectations: FORMAT,
            object: "o".into(),
            program: "p".into(),
            capture: "c".into(),
            options: RecordedOptions {
                cpus: 1,
                seed: 0,
                ifindex: 1,
                rxq: None,
            },
            packets,
            maps: serde_json::json!({ "m": [1] }),
        }
    }

    #[test]
    fn reports_the_first_differing_byte() {
        let exp = expectations(vec![packet(0, "tx", "00112233")]);
        assert_eq!(exp.compare_packet(&packet(0, "tx", "00112233")), None);
        let diff = exp.compare_packet(&packet(0, "tx", "0011ff33")).unwrap();
        assert!(diff.contains("packet 0 differs"), "{diff}");
        assert!(diff.contains("first differing byte: 2"), "{diff}");
        let diff = exp.compare_packet(&packet(0, "drop", "00112233")).unwrap();
        assert!(diff.contains("expected: action tx") && diff.contains("got:      action drop"));
    }

    #[test]
    fn extra_packets_and_maps_are_differences() {
        let exp = expectations(vec![packet(0, "tx", "00")]);
        assert!(
            exp.compare_packet(&packet(1, "tx", "00"))
                .unwrap()
                .contains("stop after 1")
        );
        assert!(
            exp.compare_end(2, &serde_json::json!({ "m": [1] }))
                .is_some()
        );
        assert_eq!(exp.compare_end(1, &serde_json::json!({ "m": [1] })), None);
        assert!(
            exp.compare_end(1, &serde_json::json!({ "m": [2] }))
                .unwrap()
                .contains("map m")
        );
    }

    #[test]
    fn round_trips_through_a_file() {
        let exp = expectations(vec![packet(0, "pass", "ab")]);
        let path = std::env::temp_dir().join(format!("bpfemu-exp-{}.json", std::process::id()));
        exp.save(&path).unwrap();
        let back = Expectations::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.packets, exp.packets);
        assert_eq!(back.maps, exp.maps);
    }
}
