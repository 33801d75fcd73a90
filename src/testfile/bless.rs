//! `--bless`: what came out written into the test file as the new expectations, for review
//! in the diff (as snapshot-testing tools do). Only tests that fail (or expect nothing) are
//! rewritten, so a hand-written expectation that holds stays as written and a second
//! `--bless` changes nothing. The file is edited with `toml_edit`: comments, order and
//! layout outside the rewritten `[test.expect]` tables are kept.
//!
//! A rewritten expectation keeps the shape it had: output fields stay fields (with the
//! values that came out), listed map entries stay listed. It holds the action (one, or one
//! per packet), the output packet (as hex when none was given, for a single packet that was
//! not dropped), the redirect target, the map entries the run changed (per-CPU values as CPU
//! 0's), the records and the printk lines.

use super::CaseRun;
use super::check::PacketOut;
use super::spec::{Case, Output};
use crate::expect::map_delta;
use crate::layers::dissect::{dissect, lookup};
use crate::mapio::describe_entry;
use anyhow::{Context, Result};
use serde_json::{Map, Value};
use std::path::Path;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

/// A test's new expectations, as TOML values in the order they are written.
pub struct Blessing(Vec<(&'static str, toml_edit::Value)>, Option<Table>);

/// The expectations `run` meets.
pub fn expectations(case: &Case, run: &CaseRun) -> Blessing {
    let got = &run.observed;
    let mut keys: Vec<(&'static str, toml_edit::Value)> = Vec::new();
    let actions: Vec<&str> = got.packets.iter().map(|p| p.action.as_str()).collect();
    keys.push((
        "action",
        match actions.iter().all(|a| *a == actions[0]) {
            true => actions[0].into(),
            false => strings(actions.iter().copied()),
        },
    ));
    if let Some(output) = output(case, &got.packets) {
        keys.push(("output", output));
    }
    if let Some(last) = got.packets.last()
        && (!last.meta.is_empty() || case.expect.meta.is_some())
    {
        keys.push(("meta", crate::replay::hex(&last.meta).into()));
    }
    let redirects: Vec<&str> = got
        .packets
        .iter()
        .filter(|p| p.action == "redirect")
        .filter_map(|p| p.redirect.as_deref())
        .collect();
    if let Some(first) = redirects.first()
        && redirects.iter().all(|r| r == first)
        && redirects.len() == got.packets.len()
    {
        keys.push(("redirect", (*first).into()));
    }
    if !got.records.is_empty() || case.expect.records.is_some() {
        keys.push(("records", strings(got.records.iter().map(String::as_str))));
    }
    let printk = got.printk.clone().unwrap_or_default();
    if !printk.is_empty() || case.expect.printk.is_some() {
        keys.push(("printk", strings(printk.iter().map(String::as_str))));
    }
    Blessing(keys, maps(case, run))
}

fn strings<'a>(items: impl Iterator<Item = &'a str>) -> toml_edit::Value {
    let mut array: Array = items.collect();
    multiline(&mut array);
    toml_edit::Value::Array(array)
}

/// One element a line, when there are several.
fn multiline(array: &mut Array) {
    if array.len() < 2 {
        return;
    }
    for v in array.iter_mut() {
        v.decor_mut().set_prefix("\n    ");
    }
    array.set_trailing(",\n");
    array.set_trailing_comma(false);
}

/// The output expectation: the same fields as before with the values that came out, or the
/// frame's bytes for a single packet that was not dropped.
fn output(case: &Case, packets: &[PacketOut]) -> Option<toml_edit::Value> {
    let last = packets.last()?;
    match &case.expect.output {
        Some(Output::Fields(fields)) => {
            let layers = dissect(&last.frame);
            let mut table = InlineTable::new();
            for (layer, wanted) in fields {
                let mut inner = InlineTable::new();
                for field in wanted.as_object().into_iter().flatten().map(|(f, _)| f) {
                    if let Some(v) = lookup(&layers, layer, field) {
                        let value: toml_edit::Value = match v.number() {
                            Some(n) if n <= i64::MAX as u64 => (n as i64).into(),
                            _ => v.to_string().into(),
                        };
                        inner.insert(field, value);
                    }
                }
                table.insert(layer, toml_edit::Value::InlineTable(inner));
            }
            Some(toml_edit::Value::InlineTable(table))
        }
        Some(Output::Bytes(_)) => Some(crate::replay::hex(&last.frame).into()),
        None if packets.len() == 1 && !matches!(last.action.as_str(), "drop" | "aborted") => {
            Some(crate::replay::hex(&last.frame).into())
        }
        None => None,
    }
}

/// `[test.expect.maps]`: the entries the run changed, and the ones the test listed, as they
/// are after the run, typed by BTF.
fn maps(case: &Case, run: &CaseRun) -> Option<Table> {
    let object = run.prepared.object();
    let after = &run.observed.maps;
    let mut wanted: std::collections::BTreeSet<(String, Vec<u8>)> = map_delta(&run.before, after)
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k)
        .collect();
    if let Some(listed) = &case.expect.maps
        && let Ok(contents) =
            bpfemu_loader::btf::json::parse_map_contents(listed, &object.maps, object.btf.as_ref())
    {
        for map in contents {
            for e in map.entries {
                wanted.insert((map.name.clone(), e.key));
            }
        }
    }
    if wanted.is_empty() {
        return None;
    }
    let mut by_map: Map<String, Value> = Map::new();
    for (map, key) in wanted {
        let Some(value) = after.get(&map).and_then(|m| m.get(&key)) else {
            continue;
        };
        let spec = object.maps.iter().find(|m| m.name == map)?;
        let per_cpu = bpfemu_loader::btf::json::is_per_cpu(spec.map_type);
        let value = if per_cpu {
            &value[..(spec.value_size as usize).min(value.len())]
        } else {
            value
        };
        let doc: Value = serde_json::from_str(&describe_entry(object, &map, &key, value)).ok()?;
        let mut entry = Map::new();
        if let Some(k) = doc.get("key") {
            entry.insert("key".into(), k.clone());
        }
        let v = if per_cpu {
            doc.pointer("/values/0/value")
        } else {
            doc.get("value")
        };
        entry.insert("value".into(), v?.clone());
        by_map
            .entry(map)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("an array")
            .push(Value::Object(entry));
    }
    let mut table = Table::new();
    for (map, entries) in by_map {
        let mut value = toml_value(&entries);
        if let toml_edit::Value::Array(a) = &mut value {
            for v in a.iter_mut() {
                v.decor_mut().set_prefix("\n    ");
            }
            a.set_trailing(",\n");
        }
        table.insert(&map, Item::Value(value));
    }
    Some(table)
}

/// JSON as a TOML value: objects as inline tables, numbers past i64 as hex strings.
pub fn toml_value(v: &Value) -> toml_edit::Value {
    match v {
        Value::Null => "".into(),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into(),
            (None, Some(u), _) => format!("{u:#x}").into(),
            (_, _, Some(f)) => f.into(),
            _ => n.to_string().into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => toml_edit::Value::Array(items.iter().map(toml_value).collect()),
        Value::Object(map) => {
            let mut t = InlineTable::new();
            for (k, v) in map {
                t.insert(k, toml_value(v));
            }
            toml_edit::Value::InlineTable(t)
        }
    }
}

/// `new`'s layers and fields in the order `old` gave them (a table read as JSON is sorted).
fn ordered_like(old: &InlineTable, new: &InlineTable) -> InlineTable {
    let mut out = InlineTable::new();
    for (layer, fields) in old.iter() {
        let (
            Some(toml_edit::Value::InlineTable(old_fields)),
            Some(toml_edit::Value::InlineTable(new_fields)),
        ) = (Some(fields), new.get(layer))
        else {
            continue;
        };
        let mut inner = InlineTable::new();
        for (field, _) in old_fields.iter() {
            if let Some(v) = new_fields.get(field) {
                inner.insert(field, v.clone());
            }
        }
        out.insert(layer, toml_edit::Value::InlineTable(inner));
    }
    out
}

/// Writes the blessings (by test index) into the file, everything else as it was.
pub fn rewrite(path: &Path, blessings: &[(usize, Blessing)]) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut doc: DocumentMut = text
        .parse()
        .with_context(|| format!("{}: not TOML", path.display()))?;
    let tests = doc
        .get_mut("test")
        .and_then(Item::as_array_of_tables_mut)
        .context("no [[test]] tables")?;
    for (index, Blessing(keys, maps)) in blessings {
        let test = tests.get_mut(*index).context("a test went missing")?;
        let mut old_output = None;
        let mut expect = match test.remove("expect") {
            Some(Item::Table(mut t)) => {
                old_output = t.get("output").and_then(|o| o.as_inline_table()).cloned();
                t.clear();
                t
            }
            _ => Table::new(),
        };
        for (key, value) in keys {
            let value = match (value, &old_output) {
                (toml_edit::Value::InlineTable(new), Some(old)) if *key == "output" => {
                    toml_edit::Value::InlineTable(ordered_like(old, new))
                }
                _ => value.clone(),
            };
            expect.insert(key, Item::Value(value));
        }
        if let Some(maps) = maps {
            expect.insert("maps", Item::Table(maps.clone()));
        }
        test.insert("expect", Item::Table(expect));
    }
    let out = doc.to_string();
    if out != text {
        std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
