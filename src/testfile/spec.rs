//! A test file read: TOML, a `[[test]]` array, each test with its object and program (paths
//! relative to the file), maps before, packets in and what must come out. Anything it cannot
//! use is bad input, reported at its line (`FILE:LINE: ...`): a misspelt key must not turn
//! into a test that checks nothing.

use crate::layers::build::{build, parse_hex};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use toml_edit::{Document, Item, Table};

/// One test of a file.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    /// The line of its `[[test]]` header.
    pub line: usize,
    pub object: PathBuf,
    pub program: Option<String>,
    /// Routing and neighbour tables for bpf_fib_lookup (a `--fib` JSON file).
    pub fib: Option<PathBuf>,
    /// The sockets bpf_sk_lookup_tcp/udp find (a `--sockets` JSON file).
    pub sockets: Option<PathBuf>,
    /// Virtual CPUs of bpfemu's run (a cpumap needs its CPUs); packets run on CPU 0.
    pub cpus: u32,
    /// Why the kernel cannot run this test (`--kernel` skips it and says so).
    pub kernel_skip: Option<String>,
    /// Maps before the first packet, as a bpftool JSON document.
    pub maps: Option<Value>,
    /// The packets, run in order over the same maps.
    pub packets: Vec<Vec<u8>>,
    pub expect: Expect,
}

/// What must come out; `None` is not checked.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    /// One action for every packet, or one per packet.
    pub action: Option<Vec<String>>,
    pub output: Option<Output>,
    /// The metadata in front of the output packet (`bpf_xdp_adjust_meta`), hex.
    pub meta: Option<Vec<u8>>,
    /// The redirect target as bpfemu names it (`tx_ports[1] (ifindex 3)`), or `none`.
    pub redirect: Option<String>,
    /// Map entries after the last packet (bpftool JSON; per-CPU values are CPU 0's).
    pub maps: Option<Value>,
    pub records: Option<Vec<String>>,
    pub printk: Option<Vec<String>>,
}

impl Expect {
    pub fn is_empty(&self) -> bool {
        self.action.is_none()
            && self.output.is_none()
            && self.meta.is_none()
            && self.redirect.is_none()
            && self.maps.is_none()
            && self.records.is_none()
            && self.printk.is_none()
    }
}

/// The output packet: exact bytes, or fields by layer (`ipv4.ttl`).
#[derive(Clone, Debug)]
pub enum Output {
    Bytes(Vec<u8>),
    Fields(Map<String, Value>),
}

/// A file's tests, with what went wrong reading it.
pub struct TestFile {
    pub path: PathBuf,
    pub cases: Vec<Result<Case, String>>,
}

/// Reads a test file; `Err` when the file as a whole cannot be used (`FILE:LINE: why`).
pub fn read(path: &Path) -> Result<TestFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {}", path.display(), crate::replay::io_reason(&e)))?;
    let doc = Document::parse(text.clone()).map_err(|e| {
        let line = e.span().map_or(1, |s| line_at(&text, s.start));
        let why = e.message().trim().to_owned();
        format!("{}:{line}: {why}", path.display())
    })?;
    let at = |span: Option<std::ops::Range<usize>>| span.map_or(1, |s| line_at(&text, s.start));
    if let Some((key, item)) = doc.iter().find(|(k, _)| *k != "test") {
        let line = at(doc
            .as_table()
            .key(key)
            .and_then(|k| k.span())
            .or(item.span()));
        return Err(format!(
            "{}:{line}: unknown key `{key}` (a test file holds [[test]] tables)",
            path.display()
        ));
    }
    let Some(tests) = doc.get("test").and_then(Item::as_array_of_tables) else {
        return Err(format!(
            "{}:1: no tests: a test file holds [[test]] tables",
            path.display()
        ));
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut names = std::collections::BTreeSet::new();
    let cases = tests
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let line = at(table.span());
            let case = read_case(table, dir, i)
                .map_err(|why| format!("{}:{line}: {why}", path.display()))?;
            if !names.insert(case.name.clone()) {
                return Err(format!(
                    "{}:{line}: a second test named `{}`",
                    path.display(),
                    case.name
                ));
            }
            Ok(Case { line, ..case })
        })
        .collect();
    Ok(TestFile {
        path: path.to_owned(),
        cases,
    })
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

const TEST_KEYS: &[&str] = &[
    "name",
    "object",
    "program",
    "fib",
    "sockets",
    "cpus",
    "maps",
    "packet",
    "expect",
    "kernel_skip",
];
const EXPECT_KEYS: &[&str] = &[
    "action", "output", "meta", "redirect", "maps", "records", "printk",
];

fn read_case(table: &Table, dir: &Path, index: usize) -> Result<Case, String> {
    let v = table_json(table);
    let obj = v.as_object().expect("a table");
    unknown_keys("", obj, TEST_KEYS)?;
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("name: expected a string".into()),
        None => format!("test{index}"),
    };
    let within = |why: String| format!("test `{name}`: {why}");
    let object = match obj.get("object") {
        Some(Value::String(s)) => dir.join(s),
        _ => {
            return Err(within(
                "object: the BPF object's path is needed (a string)".into(),
            ));
        }
    };
    let program = match obj.get("program") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(within("program: expected a string".into())),
    };
    let fib = match obj.get("fib") {
        None => None,
        Some(Value::String(s)) => Some(dir.join(s)),
        Some(_) => return Err(within("fib: a FIB file's path (a string)".into())),
    };
    let sockets = match obj.get("sockets") {
        None => None,
        Some(Value::String(s)) => Some(dir.join(s)),
        Some(_) => {
            return Err(within(
                "sockets: a socket table file's path (a string)".into(),
            ));
        }
    };
    let cpus = match obj.get("cpus") {
        None => 1,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=256) => n as u32,
            _ => return Err(within("cpus: a number from 1 to 256".into())),
        },
    };
    let kernel_skip = match obj.get("kernel_skip") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            return Err(within(
                "kernel_skip: why the kernel cannot run the test (a string)".into(),
            ));
        }
    };
    let maps = obj
        .get("maps")
        .map(|m| maps_doc(m, dir, "maps"))
        .transpose()
        .map_err(within)?;
    let packets = match obj.get("packet") {
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, p)| packets(p, dir).map_err(|e| format!("packet[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.concat()),
        Some(p) => packets(p, dir).map_err(|e| format!("packet: {e}")),
        None => Err("packet: no packet to run".into()),
    }
    .map_err(within)?;
    if packets.is_empty() {
        return Err(within("packet: no packet to run".into()));
    }
    let expect = match obj.get("expect") {
        Some(e) => read_expect(e, dir).map_err(within)?,
        None => Expect::default(),
    };
    Ok(Case {
        name,
        line: 0,
        object,
        program,
        fib,
        sockets,
        cpus,
        kernel_skip,
        maps,
        packets,
        expect,
    })
}

fn unknown_keys(prefix: &str, obj: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown key `{prefix}{k}` (keys: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// Maps as bpftool JSON: a file (a string, relative to the test file) or inline tables.
fn maps_doc(v: &Value, dir: &Path, key: &str) -> Result<Value, String> {
    match v {
        Value::String(file) => {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "{key}: {}: {}",
                    path.display(),
                    crate::replay::io_reason(&e)
                )
            })?;
            serde_json::from_str(&text)
                .map_err(|e| format!("{key}: {}: not JSON: {e}", path.display()))
        }
        Value::Object(_) => Ok(v.clone()),
        _ => Err(format!(
            "{key}: a bpftool JSON file's path, or a table of maps"
        )),
    }
}

/// The packets one `packet` table gives: `hex`, a `pcap` with an `index` or a `range`, or
/// layers.
fn packets(v: &Value, dir: &Path) -> Result<Vec<Vec<u8>>, String> {
    let obj = v.as_object().ok_or("expected a table")?;
    if let Some(h) = obj.get("hex") {
        unknown_keys("", obj, &["hex"])?;
        let h = h.as_str().ok_or("hex: expected a string")?;
        return Ok(vec![parse_hex(h).map_err(|e| format!("hex: {e}"))?]);
    }
    if let Some(p) = obj.get("pcap") {
        unknown_keys("", obj, &["pcap", "index", "range"])?;
        let file = dir.join(p.as_str().ok_or("pcap: expected a string")?);
        let range = match (obj.get("index"), obj.get("range")) {
            (Some(i), None) => {
                let i = i
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|i| *i < usize::MAX)
                    .ok_or("index: expected a packet's index")?;
                i..i + 1
            }
            (None, Some(Value::String(r))) => parse_range(r)?,
            (None, None) => 0..usize::MAX,
            _ => return Err("give index (a number) or range (\"A..B\"), not both".into()),
        };
        return read_pcap(&file, range);
    }
    build(obj).map(|frame| vec![frame])
}

/// `A..B` (B excluded), `A..=B`, `A..` or a single `N`.
fn parse_range(r: &str) -> Result<std::ops::Range<usize>, String> {
    let bad = || format!("range: `{r}` is not A..B, A..=B or A..");
    let num = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
    if let Some((a, b)) = r.split_once("..=") {
        return Ok(num(a)?..num(b)?.checked_add(1).ok_or_else(bad)?);
    }
    if let Some((a, b)) = r.split_once("..") {
        let end = if b.trim().is_empty() {
            usize::MAX
        } else {
            num(b)?
        };
        return Ok(num(a)?..end);
    }
    let n = num(r)?;
    Ok(n..n.checked_add(1).ok_or_else(bad)?)
}

fn read_pcap(file: &Path, range: std::ops::Range<usize>) -> Result<Vec<Vec<u8>>, String> {
    let mut reader = crate::pcap::PcapReader::open(file).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut seen = 0;
    while let Some(item) = reader.next_ref() {
        let packet = item.map_err(|e| e.to_string())?;
        seen += 1;
        if range.contains(&packet.index) {
            out.push(packet.data.to_vec());
        }
        if packet.index + 1 >= range.end {
            break;
        }
    }
    if out.is_empty() || (range.end != usize::MAX && out.len() != range.len()) {
        return Err(format!(
            "{}: has {seen} packets, the range asks for {}..{}",
            file.display(),
            range.start,
            if range.end == usize::MAX {
                String::new()
            } else {
                range.end.to_string()
            }
        ));
    }
    Ok(out)
}

fn read_expect(v: &Value, dir: &Path) -> Result<Expect, String> {
    let obj = v.as_object().ok_or("expect: expected a table")?;
    unknown_keys("expect.", obj, EXPECT_KEYS)?;
    let strings = |key: &str| -> Result<Option<Vec<String>>, String> {
        match obj.get(key) {
            None => Ok(None),
            Some(Value::Array(list)) => list
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_owned)
                        .ok_or(format!("expect.{key}: a list of strings"))
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(format!("expect.{key}: a list of strings")),
        }
    };
    let action = match obj.get("action") {
        None => None,
        Some(Value::String(s)) => Some(vec![action_name(s)?]),
        Some(Value::Array(list)) => Some(
            list.iter()
                .map(|a| {
                    a.as_str()
                        .ok_or("expect.action: a list of action names".to_owned())
                        .and_then(action_name)
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(
                "expect.action: an action (pass, drop, tx, redirect, aborted) or a list".into(),
            );
        }
    };
    let output = match obj.get("output") {
        None => None,
        Some(Value::String(h)) => Some(Output::Bytes(
            parse_hex(h).map_err(|e| format!("expect.output: {e}"))?,
        )),
        Some(Value::Object(fields)) => {
            check_output_fields(fields)?;
            Some(Output::Fields(fields.clone()))
        }
        Some(_) => return Err("expect.output: hex bytes, or a table of layers and fields".into()),
    };
    let meta = match obj.get("meta") {
        None => None,
        Some(Value::String(h)) => Some(parse_hex(h).map_err(|e| format!("expect.meta: {e}"))?),
        Some(_) => return Err("expect.meta: hex bytes".into()),
    };
    let redirect = match obj.get("redirect") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("expect.redirect: a string (`none` for no redirect)".into()),
    };
    Ok(Expect {
        action,
        output,
        meta,
        redirect,
        maps: obj
            .get("maps")
            .map(|m| maps_doc(m, dir, "expect.maps"))
            .transpose()?,
        records: strings("records")?,
        printk: strings("printk")?,
    })
}

/// Output fields are `layer.field = value`: each layer a table of known fields.
fn check_output_fields(fields: &Map<String, Value>) -> Result<(), String> {
    for (layer, v) in fields {
        if !crate::layers::LAYER_NAMES.contains(&layer.as_str()) {
            return Err(format!(
                "expect.output: unknown layer `{layer}` (layers: {})",
                crate::layers::LAYER_NAMES.join(", ")
            ));
        }
        if !v.is_object() {
            return Err(format!("expect.output.{layer}: a table of fields"));
        }
    }
    Ok(())
}

/// `pass`, `XDP_PASS` and `2` all name XDP_PASS.
pub fn action_name(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    let name = lower.strip_prefix("xdp_").unwrap_or(&lower);
    let known = ["aborted", "drop", "pass", "tx", "redirect"];
    if known.contains(&name) {
        return Ok(name.to_owned());
    }
    match name.parse::<u32>() {
        Ok(n) => Ok(bpfemu_vm::xdp::XdpAction::from_retval(n)
            .name()
            .into_owned()),
        Err(_) => Err(format!(
            "expect.action: `{s}` is not an action (pass, drop, tx, redirect, aborted, or a number)"
        )),
    }
}

/// A TOML table as JSON (integers as numbers, dates as strings).
pub fn table_json(table: &Table) -> Value {
    Value::Object(
        table
            .iter()
            .map(|(k, item)| (k.to_owned(), item_json(item)))
            .collect(),
    )
}

fn item_json(item: &Item) -> Value {
    match item {
        Item::None => Value::Null,
        Item::Value(v) => value_json(v),
        Item::Table(t) => table_json(t),
        Item::ArrayOfTables(a) => Value::Array(a.iter().map(table_json).collect()),
    }
}

fn value_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => Value::from(*f.value()),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(value_json).collect()),
        T::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_owned(), value_json(v)))
                .collect(),
        ),
    }
}
