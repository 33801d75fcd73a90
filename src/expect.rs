//! Expectations for regression replay: `--record FILE` writes what a replay gave, `--check
//! FILE` replays and reports what changed.
//!
//! The file is JSON Lines, written and read as the replay streams, so that memory stays
//! constant however long the capture:
//! 1. a header: what identifies the run (object and its SHA-256, program, seed, CPUs, ifindex,
//!    rx queue, map setup and routing files with their digests, map sizes);
//! 2. one line per packet, in capture order: the action (the return value only when it is no
//!    known action), the redirect target, or the error; the output bytes as the edits that turn
//!    the input frame into them (nothing when the program left the frame alone);
//! 3. a trailer: the packet count and the capture's SHA-256;
//! 4. one line per map entry the replay changed (added, changed or deleted), against the
//!    state the map setup gave: a check rebuilds the same setup, so the changes say it all.
//!
//! A check first compares the header and names every part of the run that differs; then the
//! first packet that differs, with the first differing byte; then the capture digest and the
//! map entries that differ (key, expected, got).

use crate::mapio::RawMaps;
use crate::replay::{PacketResult, hex};
use anyhow::{Context, Result, bail};
use bpfemu_vm::xdp::XdpAction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The format version; bumped when the file's meaning changes.
const FORMAT: u32 = 2;

/// Map entry differences listed before "and N more".
const MAX_LISTED: usize = 10;

/// What identifies a run: if any of it changes, the results may change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    pub object: String,
    pub object_sha256: String,
    pub program: String,
    pub capture: String,
    pub seed: u64,
    pub cpus: u32,
    pub ifindex: u32,
    pub rxq: Option<u32>,
    /// The `--maps` file's name and digest.
    pub maps: Option<String>,
    pub maps_sha256: Option<String>,
    /// The `--fib` file's name and digest.
    pub fib: Option<String>,
    pub fib_sha256: Option<String>,
    /// The `--sockets` file's name and digest (absent from recordings made without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets_sha256: Option<String>,
    /// `--map-size NAME=N`.
    pub map_sizes: BTreeMap<String, u32>,
}

impl RunIdentity {
    /// Every part of the run's setup that differs between `self` (recorded) and `now`, one
    /// phrase each. The object is not part of the setup: a check is there to compare a changed
    /// program's behaviour with the recorded one (see [`RunIdentity::object_change`]). File
    /// names alone do not count: a renamed file with the same digest is the same input.
    pub fn changes(&self, now: &RunIdentity) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |what: &str, recorded: String, current: String| {
            if recorded != current {
                out.push(format!("{what}: recorded {recorded}, now {current}"));
            }
        };
        differ("program", self.program.clone(), now.program.clone());
        differ("--seed", self.seed.to_string(), now.seed.to_string());
        differ("--cpus", self.cpus.to_string(), now.cpus.to_string());
        differ(
            "--ifindex",
            self.ifindex.to_string(),
            now.ifindex.to_string(),
        );
        differ("--rxq", rxq(self.rxq), rxq(now.rxq));
        differ(
            "--map-size",
            format!("{:?}", self.map_sizes),
            format!("{:?}", now.map_sizes),
        );
        // Files by their contents: the same contents under another name is the same run.
        for (what, (name, digest), (now_name, now_digest)) in [
            (
                "--maps",
                (&self.maps, &self.maps_sha256),
                (&now.maps, &now.maps_sha256),
            ),
            (
                "--fib",
                (&self.fib, &self.fib_sha256),
                (&now.fib, &now.fib_sha256),
            ),
            (
                "--sockets",
                (&self.sockets, &self.sockets_sha256),
                (&now.sockets, &now.sockets_sha256),
            ),
        ] {
            if digest != now_digest {
                out.push(format!(
                    "{what}: recorded {}, now {}",
                    optional_file(name, digest),
                    optional_file(now_name, now_digest)
                ));
            }
        }
        out
    }
}

impl RunIdentity {
    /// "the object changed since the recording: ..." when its contents did.
    pub fn object_change(&self, now: &RunIdentity) -> Option<String> {
        (self.object_sha256 != now.object_sha256).then(|| {
            format!(
                "the object changed since the recording: recorded {}, now {}",
                describe_file(&self.object, Some(&self.object_sha256)),
                describe_file(&now.object, Some(&now.object_sha256)),
            )
        })
    }
}

fn rxq(rxq: Option<u32>) -> String {
    rxq.map_or_else(|| "the RSS queue".into(), |q| q.to_string())
}

fn describe_file(name: &str, sha256: Option<&str>) -> String {
    match sha256 {
        Some(digest) => format!("{name} (sha256 {})", &digest[..digest.len().min(12)]),
        None => name.to_owned(),
    }
}

fn optional_file(name: &Option<String>, sha256: &Option<String>) -> String {
    name.as_deref()
        .map_or_else(|| "none".into(), |n| describe_file(n, sha256.as_deref()))
}

/// The file name of `path`, for the reader's orientation.
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

/// The header line.
#[derive(Serialize, Deserialize)]
struct Header {
    bpfemu_expectations: u32,
    run: RunIdentity,
}

/// What one packet gave, as one line of the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketRecord {
    pub packet: usize,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub action: Option<String>,
    /// Only for a return value that is no XDP action.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retval: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub redirect: Option<String>,
    /// The packet was refused or its run stopped.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Length of the output (data_meta to data_end) when it is not the input's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub len: Option<usize>,
    /// `[offset, hex bytes]` runs where the output differs from the input frame.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub edits: Vec<(usize, String)>,
    /// Ring buffer records and perf event samples, `MAP HEX` / `MAP[SLOT] HEX`, in order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub events: Vec<String>,
}

impl PacketRecord {
    /// The record of `result`, whose input frame was `input`.
    pub fn new(input: &[u8], result: &PacketResult) -> PacketRecord {
        let mut record = PacketRecord {
            packet: result.index,
            action: None,
            retval: None,
            redirect: None,
            error: None,
            len: None,
            edits: Vec::new(),
            events: Vec::new(),
        };
        match &result.outcome {
            Ok(o) => {
                record.action = Some(o.action.name().into_owned());
                record.retval = matches!(o.action, XdpAction::Unknown(_)).then_some(o.retval);
                record.redirect = o.redirect.as_ref().map(ToString::to_string);
                record.len = (o.data_out.len() != input.len()).then_some(o.data_out.len());
                record.edits = edits(input, &o.data_out);
                record.events = crate::replay::events(o)
                    .iter()
                    .map(|e| e.to_text())
                    .collect();
            }
            Err(e) => record.error = Some(e.clone()),
        }
        record
    }

    /// The output bytes this record describes, given the input frame.
    fn output(&self, input: &[u8]) -> Option<Vec<u8>> {
        self.action.as_ref()?;
        let mut out = input.to_vec();
        out.resize(self.len.unwrap_or(input.len()), 0);
        for (offset, bytes) in &self.edits {
            let bytes = unhex(bytes)?;
            out.get_mut(*offset..offset.checked_add(bytes.len())?)?
                .copy_from_slice(&bytes);
        }
        Some(out)
    }

    fn summary(&self, input: &[u8]) -> String {
        if let Some(e) = &self.error {
            return format!("error: {e}");
        }
        let mut text = format!("action {}", self.action.as_deref().unwrap_or("?"));
        if let Some(r) = self.retval {
            text += &format!(" (retval {r})");
        }
        if let Some(r) = &self.redirect {
            text += &format!(", redirect {r}");
        }
        let len = self.len.unwrap_or(input.len());
        text += &format!(", {len} bytes");
        for e in &self.events {
            text += &format!(", event {e}");
        }
        text
    }
}

/// Runs of bytes where `output` differs from `input` (bytes past the input's end always
/// differ); runs closer than 8 bytes are merged so that a rewritten header stays one run.
fn edits(input: &[u8], output: &[u8]) -> Vec<(usize, String)> {
    const MERGE_GAP: usize = 8;
    let differs = |i: usize| input.get(i) != Some(&output[i]);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in (0..output.len()).filter(|&i| differs(i)) {
        match runs.last_mut() {
            Some((_, end)) if i - *end < MERGE_GAP => *end = i + 1,
            _ => runs.push((i, i + 1)),
        }
    }
    runs.into_iter()
        .map(|(start, end)| (start, hex(&output[start..end])))
        .collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The line after the packets.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    packets: usize,
    capture_sha256: String,
}

/// A map entry the replay changed: its value after the replay, or `deleted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapChange {
    map: String,
    key: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    value: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    deleted: bool,
}

/// (map, key) -> the value after the replay, `None` when the replay deleted the entry.
type MapDelta = BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>;

/// The entries that differ between the state before and after the replay.
pub fn map_delta(before: &RawMaps, after: &RawMaps) -> MapDelta {
    let mut delta = MapDelta::new();
    let empty = BTreeMap::new();
    for (name, entries) in after {
        let old = before.get(name).unwrap_or(&empty);
        for (key, value) in entries {
            if old.get(key) != Some(value) {
                delta.insert((name.clone(), key.clone()), Some(value.clone()));
            }
        }
        for key in old.keys().filter(|k| !entries.contains_key(*k)) {
            delta.insert((name.clone(), key.clone()), None);
        }
    }
    delta
}

/// Writes an expectations file as the replay goes: into `FILE.partial`, renamed to `FILE`
/// when complete, so that a failed run leaves no half-written expectations behind.
pub struct Recorder {
    out: BufWriter<File>,
    partial: PathBuf,
    path: PathBuf,
}

impl Recorder {
    /// Creates the file (before any work, so that a bad path fails at once).
    pub fn create(path: &Path) -> Result<Recorder> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file =
            File::create(&partial).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Recorder {
            out: BufWriter::new(file),
            partial,
            path: path.to_owned(),
        })
    }

    fn line(&mut self, value: &impl Serialize) -> Result<()> {
        serde_json::to_writer(&mut self.out, value)?;
        self.out
            .write_all(b"\n")
            .with_context(|| format!("writing {}", self.path.display()))
    }

    pub fn header(&mut self, run: &RunIdentity) -> Result<()> {
        self.line(&Header {
            bpfemu_expectations: FORMAT,
            run: run.clone(),
        })
    }

    pub fn packet(&mut self, record: &PacketRecord) -> Result<()> {
        self.line(record)
    }

    /// The trailer and the map changes; then the file takes its name.
    pub fn finish(
        mut self,
        packets: usize,
        capture_sha256: String,
        delta: &MapDelta,
    ) -> Result<()> {
        self.line(&Trailer {
            packets,
            capture_sha256,
        })?;
        for ((map, key), value) in delta {
            self.line(&MapChange {
                map: map.clone(),
                key: hex(key),
                value: value.as_deref().map(hex),
                deleted: value.is_none(),
            })?;
        }
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))?;
        std::fs::rename(&self.partial, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Removes the partial file of a run that did not complete.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// Reads an expectations file as the replay goes and compares.
pub struct Checker {
    lines: std::io::Lines<BufReader<File>>,
    path: PathBuf,
    line_no: usize,
    pub recorded: RunIdentity,
    /// The packets the file holds, once the trailer has been read.
    trailer: Option<Trailer>,
}

impl Checker {
    pub fn open(path: &Path) -> Result<Checker> {
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut checker = Checker {
            lines: BufReader::new(file).lines(),
            path: path.to_owned(),
            line_no: 0,
            recorded: RunIdentity {
                object: String::new(),
                object_sha256: String::new(),
                program: String::new(),
                capture: String::new(),
                seed: 0,
                cpus: 0,
                ifindex: 0,
                rxq: None,
                maps: None,
                maps_sha256: None,
                fib: None,
                fib_sha256: None,
                sockets: None,
                sockets_sha256: None,
                map_sizes: BTreeMap::new(),
            },
            trailer: None,
        };
        let first = checker.next_line()?.with_context(|| {
            format!("{}: empty, not a bpfemu expectations file", path.display())
        })?;
        let version = serde_json::from_str::<serde_json::Value>(&first)
            .ok()
            .and_then(|v| v.get("bpfemu_expectations")?.as_u64());
        match version {
            Some(v) if v == u64::from(FORMAT) => {}
            Some(v) => bail!(
                "{}: expectations format {v}; this bpfemu reads format {FORMAT}: record them again",
                path.display()
            ),
            None => bail!("{}: not a bpfemu expectations file", path.display()),
        }
        let header: Header = serde_json::from_str(&first)
            .with_context(|| format!("{}: line 1: a malformed header", path.display()))?;
        checker.recorded = header.run;
        Ok(checker)
    }

    fn next_line(&mut self) -> Result<Option<String>> {
        self.line_no += 1;
        self.lines
            .next()
            .transpose()
            .with_context(|| format!("cannot read {}", self.path.display()))
    }

    fn malformed(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!("{}: line {}: {what}", self.path.display(), self.line_no)
    }

    /// The difference between what packet `got.packet` was expected to give and what it gave.
    pub fn packet(&mut self, input: &[u8], got: &PacketRecord) -> Result<Option<String>> {
        if let Some(trailer) = &self.trailer {
            return Ok(Some(format!(
                "packet {}: not in the expectations, which stop after {} packets",
                got.packet, trailer.packets
            )));
        }
        let line = self
            .next_line()?
            .ok_or_else(|| self.malformed("the file ends before its trailer"))?;
        if let Ok(trailer) = serde_json::from_str::<Trailer>(&line) {
            let packets = trailer.packets;
            self.trailer = Some(trailer);
            return Ok(Some(format!(
                "packet {}: not in the expectations, which stop after {packets} packets",
                got.packet
            )));
        }
        let want: PacketRecord = serde_json::from_str(&line)
            .map_err(|e| self.malformed(&format!("not a packet record: {e}")))?;
        if want.packet != got.packet {
            return Err(self.malformed(&format!(
                "holds packet {}, packet {} was expected here",
                want.packet, got.packet
            )));
        }
        Ok((want != *got).then(|| describe_difference(input, &want, got)))
    }

    /// What is left after the last packet: more packets expected, another capture, or map
    /// entries that differ. `before` is the map state the setup gave, `after` the final one.
    pub fn finish(
        mut self,
        packets: usize,
        capture_sha256: &str,
        before: &RawMaps,
        after: &RawMaps,
        describe: impl Fn(&str, &[u8], &[u8]) -> String,
    ) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let trailer = match self.trailer.take() {
            Some(t) => t,
            None => self.read_trailer()?,
        };
        if trailer.packets != packets {
            problems.push(format!(
                "the capture gave {packets} packets, the expectations hold {}",
                trailer.packets
            ));
        }
        if trailer.capture_sha256 != capture_sha256 {
            problems.insert(
                0,
                format!(
                    "capture: recorded sha256 {}, now {} ({} packets recorded, {packets} now)",
                    &trailer.capture_sha256[..trailer.capture_sha256.len().min(12)],
                    &capture_sha256[..capture_sha256.len().min(12)],
                    trailer.packets
                ),
            );
        }
        let expected = self.read_map_changes()?;
        let got = map_delta(before, after);
        problems.extend(map_differences(&expected, &got, before, describe));
        Ok(problems)
    }

    /// Skips the packets not compared (after the first difference), up to the trailer.
    fn read_trailer(&mut self) -> Result<Trailer> {
        loop {
            let line = self
                .next_line()?
                .ok_or_else(|| self.malformed("the file ends before its trailer"))?;
            if let Ok(trailer) = serde_json::from_str::<Trailer>(&line) {
                return Ok(trailer);
            }
        }
    }

    fn read_map_changes(&mut self) -> Result<MapDelta> {
        let mut delta = MapDelta::new();
        while let Some(line) = self.next_line()? {
            let change: MapChange = serde_json::from_str(&line)
                .map_err(|e| self.malformed(&format!("not a map entry: {e}")))?;
            let key = unhex(&change.key).ok_or_else(|| self.malformed("a key that is not hex"))?;
            let value = match (&change.value, change.deleted) {
                (Some(v), false) => {
                    Some(unhex(v).ok_or_else(|| self.malformed("a value that is not hex"))?)
                }
                (None, true) => None,
                _ => return Err(self.malformed("an entry needs a value or \"deleted\": true")),
            };
            delta.insert((change.map, key), value);
        }
        Ok(delta)
    }
}

/// One line per map entry whose final value differs, grouped by map: key, expected, got.
fn map_differences(
    expected: &MapDelta,
    got: &MapDelta,
    before: &RawMaps,
    describe: impl Fn(&str, &[u8], &[u8]) -> String,
) -> Vec<String> {
    let final_value = |delta: &MapDelta, map: &str, key: &[u8]| -> Option<Vec<u8>> {
        match delta.get(&(map.to_owned(), key.to_vec())) {
            Some(v) => v.clone(),
            None => before.get(map).and_then(|m| m.get(key)).cloned(),
        }
    };
    let keys: std::collections::BTreeSet<&(String, Vec<u8>)> =
        expected.keys().chain(got.keys()).collect();
    let mut per_map: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (map, key) in keys {
        let want = final_value(expected, map, key);
        let have = final_value(got, map, key);
        if want == have {
            continue;
        }
        let show = |v: &Option<Vec<u8>>| match v {
            Some(v) => describe(map, key, v),
            None => "no entry".to_owned(),
        };
        per_map.entry(map).or_default().push(format!(
            "  key {}\n    expected {}\n    got      {}",
            hex(key),
            show(&want),
            show(&have)
        ));
    }
    per_map
        .into_iter()
        .map(|(map, lines)| {
            let n = lines.len();
            let plural = if n == 1 { "y differs" } else { "ies differ" };
            let mut text = format!("map {map}: {n} entr{plural} after the replay:\n");
            text += &lines[..n.min(MAX_LISTED)].join("\n");
            if n > MAX_LISTED {
                text += &format!("\n  and {} more", n - MAX_LISTED);
            }
            text
        })
        .collect()
}

fn describe_difference(input: &[u8], want: &PacketRecord, got: &PacketRecord) -> String {
    let mut text = format!(
        "packet {} differs:\n  expected: {}\n  got:      {}",
        want.packet,
        want.summary(input),
        got.summary(input)
    );
    if let (Some(a), Some(b)) = (want.output(input), got.output(input))
        && a != b
    {
        text += &byte_difference(&a, &b);
    }
    text
}

/// Where two outputs first differ, with a few bytes of context from each.
fn byte_difference(want: &[u8], got: &[u8]) -> String {
    let first = want
        .iter()
        .zip(got)
        .position(|(x, y)| x != y)
        .unwrap_or(want.len().min(got.len()));
    let window = |s: &[u8]| hex(&s[first.min(s.len())..(first + 16).min(s.len())]);
    format!(
        "\n  first differing byte: {first}\n  expected from there: {}\n  got from there:      {}",
        window(want),
        window(got)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpfemu_vm::xdp::{XdpAction, XdpOutcome};

    fn result(index: usize, action: XdpAction, data: &[u8]) -> PacketResult {
        PacketResult {
            index,
            cpu: 0,
            outcome: Ok(XdpOutcome {
                action,
                retval: 3,
                data_out: data.to_vec(),
                meta_len: 0,
                frags_len: 0,
                redirect: None,
                printk: Vec::new(),
                perf_events: Vec::new(),
                ring_events: Vec::new(),
                insns_executed: 0,
            }),
        }
    }

    #[test]
    fn edits_rebuild_the_output_exactly() {
        let input: Vec<u8> = (0..64).collect();
        for output in [
            input.clone(),
            {
                let mut o = input.clone();
                o[3] = 0xff;
                o[9] = 0xee;
                o[40] = 0;
                o
            },
            input[..20].to_vec(),
            [input.clone(), vec![1, 2, 3]].concat(),
            vec![7; 100],
        ] {
            let record = PacketRecord::new(&input, &result(0, XdpAction::Tx, &output));
            assert_eq!(record.output(&input).unwrap(), output);
        }
        let unchanged = PacketRecord::new(&input, &result(0, XdpAction::Pass, &input));
        assert!(unchanged.edits.is_empty() && unchanged.len.is_none());
        let line = serde_json::to_string(&unchanged).unwrap();
        assert_eq!(line, r#"{"packet":0,"action":"pass"}"#);
    }

    #[test]
    fn a_changed_byte_is_reported_with_its_offset() {
        let input = [0u8; 32];
        let want = PacketRecord::new(&input, &result(4, XdpAction::Tx, &[1; 32]));
        let mut other = [1u8; 32];
        other[17] = 9;
        let got = PacketRecord::new(&input, &result(4, XdpAction::Tx, &other));
        let text = describe_difference(&input, &want, &got);
        assert!(text.contains("packet 4 differs"), "{text}");
        assert!(text.contains("first differing byte: 17"), "{text}");
    }

    #[test]
    fn map_differences_list_only_the_entries_that_differ() {
        let before: RawMaps = [(
            "m".to_owned(),
            (0u8..100).map(|k| (vec![k], vec![0])).collect(),
        )]
        .into();
        let mut after = before.clone();
        after.get_mut("m").unwrap().insert(vec![5], vec![1]);
        let expected = map_delta(&before, &after);
        assert_eq!(expected.len(), 1);
        let mut now = after.clone();
        now.get_mut("m").unwrap().insert(vec![5], vec![2]);
        now.get_mut("m").unwrap().remove(&vec![7]);
        let got = map_delta(&before, &now);
        let describe = |_: &str, k: &[u8], v: &[u8]| format!("{k:?}={v:?}");
        let lines = map_differences(&expected, &got, &before, describe);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let text = &lines[0];
        assert!(text.starts_with("map m: 2 entries differ"), "{text}");
        assert!(
            text.contains("key 05\n    expected [5]=[1]\n    got      [5]=[2]"),
            "{text}"
        );
        assert!(
            text.contains("key 07\n    expected [7]=[0]\n    got      no entry"),
            "{text}"
        );
        assert!(map_differences(&expected, &expected, &before, describe).is_empty());
    }

    #[test]
    fn identity_changes_are_named() {
        let run = RunIdentity {
            object: "a.o".into(),
            object_sha256: "11".repeat(32),
            program: "p".into(),
            capture: "c.pcap".into(),
            seed: 0,
            cpus: 1,
            ifindex: 1,
            rxq: None,
            maps: None,
            maps_sha256: None,
            fib: None,
            fib_sha256: None,
            sockets: None,
            sockets_sha256: None,
            map_sizes: BTreeMap::new(),
        };
        assert!(run.changes(&run).is_empty());
        let renamed = RunIdentity {
            object: "b.o".into(),
            ..run.clone()
        };
        assert!(run.changes(&renamed).is_empty());
        let other = RunIdentity {
            seed: 7,
            cpus: 2,
            object_sha256: "22".repeat(32),
            ..run.clone()
        };
        let changes = run.changes(&other);
        assert_eq!(
            changes,
            ["--seed: recorded 0, now 7", "--cpus: recorded 1, now 2"]
        );
        let note = run.object_change(&other).unwrap();
        assert!(
            note.contains("recorded a.o (sha256 111111111111)"),
            "{note}"
        );
        assert_eq!(run.object_change(&renamed), None);
    }
}
