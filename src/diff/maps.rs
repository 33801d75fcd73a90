//! Maps compared: every entry of every map both sides have, field by field as BTF lays the
//! value out, with the fields that depend on clocks or random numbers named, not judged.

use super::*;

// ---------------------------------------------------------------------------------------------
// Maps

/// A field of a map value: a BTF struct member or global variable (nested ones by dotted
/// path), or the whole value when there is no BTF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Leaf {
    path: String,
    offset: usize,
    size: usize,
}

/// How a map's values split into fields, and into per-CPU copies.
pub(super) struct MapLayout {
    leaves: Vec<Leaf>,
    value_size: usize,
    /// The padded size of one CPU's copy, for per-CPU maps.
    per_cpu_slot: Option<usize>,
}

impl MapLayout {
    pub(super) fn new(spec: &bpfemu_loader::MapSpec, btf: Option<&Btf>) -> MapLayout {
        let value_size = spec.value_size as usize;
        let mut leaves = Vec::new();
        if let (Some(btf), Some(ty)) = (btf, spec.value_type) {
            collect_leaves(btf, ty, "", 0, &mut leaves, 0);
        }
        leaves.retain(|l| l.size > 0 && l.offset + l.size <= value_size);
        fill_gaps(&mut leaves, value_size);
        MapLayout {
            leaves,
            value_size,
            per_cpu_slot: kbpf::is_per_cpu_map(spec.map_type).then(|| value_size.div_ceil(8) * 8),
        }
    }

    /// The value's copies: `(Some(cpu), bytes)` per CPU, or `(None, bytes)`.
    fn copies<'a>(&self, value: &'a [u8]) -> Vec<(Option<usize>, &'a [u8])> {
        match self.per_cpu_slot {
            Some(slot) => value
                .chunks(slot)
                .enumerate()
                .map(|(cpu, c)| (Some(cpu), &c[..self.value_size.min(c.len())]))
                .collect(),
            None => vec![(None, value)],
        }
    }
}

pub(super) const MAX_LEAF_DEPTH: usize = 8;

pub(super) fn collect_leaves(
    btf: &Btf,
    ty: TypeId,
    path: &str,
    offset: usize,
    out: &mut Vec<Leaf>,
    depth: usize,
) {
    let Some(id) = btf.skip_mods_and_typedefs(ty) else {
        return;
    };
    let Some(t) = btf.get(id) else {
        return;
    };
    let size = btf.size_of(id).unwrap_or(0) as usize;
    let name_or = |fallback: &str| {
        if path.is_empty() {
            fallback.to_owned()
        } else {
            path.to_owned()
        }
    };
    match &t.kind {
        BtfKind::Struct { members, .. } if depth < MAX_LEAF_DEPTH => {
            for m in members {
                let child = match (path.is_empty(), m.name.is_empty()) {
                    (_, true) => path.to_owned(),
                    (true, false) => m.name.clone(),
                    (false, false) => format!("{path}.{}", m.name),
                };
                let off = offset + (m.bit_offset / 8) as usize;
                if m.bitfield_size > 0 {
                    let bits = (m.bit_offset % 8 + m.bitfield_size) as usize;
                    out.push(Leaf {
                        path: child,
                        offset: off,
                        size: bits.div_ceil(8),
                    });
                } else {
                    collect_leaves(btf, m.ty, &child, off, out, depth + 1);
                }
            }
        }
        BtfKind::DataSec { vars, .. } if depth < MAX_LEAF_DEPTH => {
            for v in vars {
                let name = btf.name_of(v.ty).unwrap_or("?").to_owned();
                let var_ty = match btf.get(v.ty).map(|t| &t.kind) {
                    Some(BtfKind::Var { ty, .. }) => *ty,
                    _ => continue,
                };
                let before = out.len();
                collect_leaves(
                    btf,
                    var_ty,
                    &name,
                    offset + v.offset as usize,
                    out,
                    depth + 1,
                );
                if out.len() == before {
                    out.push(Leaf {
                        path: name,
                        offset: offset + v.offset as usize,
                        size: v.size as usize,
                    });
                }
            }
        }
        _ => out.push(Leaf {
            path: name_or("(value)"),
            offset,
            size,
        }),
    }
}

/// Adds `(padding @N)` leaves for bytes no field covers, so every byte is compared.
pub(super) fn fill_gaps(leaves: &mut Vec<Leaf>, value_size: usize) {
    let mut covered = vec![false; value_size];
    for l in leaves.iter() {
        covered[l.offset..l.offset + l.size]
            .iter_mut()
            .for_each(|c| *c = true);
    }
    let mut i = 0;
    while i < value_size {
        if covered[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < value_size && !covered[i] {
            i += 1;
        }
        let path = if start == 0 && i == value_size {
            "(value)".to_owned()
        } else {
            format!("(bytes {start}..{i})")
        };
        leaves.push(Leaf {
            path,
            offset: start,
            size: i - start,
        });
    }
    leaves.sort_by_key(|l| (l.offset, l.size));
}

/// A field left out of a map's comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExcludedField {
    pub field: String,
    pub reason: String,
    /// Entries (per-CPU copies count once each) where the kernel and bpfemu differ in it.
    pub entries_differing: usize,
}

/// One field of one entry that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldDiff {
    pub field: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    #[serde(serialize_with = "ser_hex")]
    pub kernel: Vec<u8>,
    #[serde(serialize_with = "ser_hex")]
    pub bpfemu: Vec<u8>,
}

/// One entry that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryMismatch {
    #[serde(serialize_with = "ser_hex")]
    pub key: Vec<u8>,
    /// The kernel's value (absent: the key is only in bpfemu).
    #[serde(serialize_with = "ser_opt_hex")]
    pub kernel: Option<Vec<u8>>,
    #[serde(serialize_with = "ser_opt_hex")]
    pub bpfemu: Option<Vec<u8>>,
    /// The fields that differ (both sides have the key).
    pub fields: Vec<FieldDiff>,
}

/// How one map compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapReport {
    pub name: String,
    pub map_type: String,
    pub compared: bool,
    /// Why the map was not compared at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared_reason: Option<String>,
    pub kernel_entries: usize,
    pub bpfemu_entries: usize,
    /// Entries equal in every compared field.
    pub equal_entries: usize,
    pub mismatches: Vec<EntryMismatch>,
    /// Entries that differ beyond the first 10,000, counted but not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted_mismatches: usize,
    /// Fields not compared (clock readings, clock/random-derived values), with the reason.
    pub not_compared_fields: Vec<ExcludedField>,
    /// Keys present on one side only that are not judged (the key set itself depends on the
    /// clock or random numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared_keys: Option<String>,
}

impl MapReport {
    pub(super) fn skipped(name: &str, map_type: &str, reason: &str) -> MapReport {
        MapReport {
            name: name.to_owned(),
            map_type: map_type.to_owned(),
            compared: false,
            not_compared_reason: Some(reason.to_owned()),
            kernel_entries: 0,
            bpfemu_entries: 0,
            equal_entries: 0,
            mismatches: Vec::new(),
            unlisted_mismatches: 0,
            not_compared_fields: Vec::new(),
            not_compared_keys: None,
        }
    }
}

pub(super) fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Why a map type's contents are not compared, or `None` when they are.
pub(super) fn not_comparable(map_type: u32) -> Option<&'static str> {
    match map_type {
        BPF_MAP_TYPE_HASH
        | BPF_MAP_TYPE_ARRAY
        | BPF_MAP_TYPE_PERCPU_HASH
        | BPF_MAP_TYPE_PERCPU_ARRAY
        | BPF_MAP_TYPE_LRU_HASH
        | BPF_MAP_TYPE_LRU_PERCPU_HASH
        | BPF_MAP_TYPE_LPM_TRIE => None,
        BPF_MAP_TYPE_PROG_ARRAY => {
            Some("a prog array holds program references (kernel fds vs. bpfemu indices)")
        }
        BPF_MAP_TYPE_ARRAY_OF_MAPS | BPF_MAP_TYPE_HASH_OF_MAPS => {
            Some("a map-in-map holds map references (kernel fds vs. bpfemu indices)")
        }
        BPF_MAP_TYPE_DEVMAP | BPF_MAP_TYPE_DEVMAP_HASH => {
            Some("a devmap holds devices (the kernel returns its own program ids)")
        }
        BPF_MAP_TYPE_CPUMAP => {
            Some("a cpumap holds CPU queues (the kernel returns its own program ids)")
        }
        BPF_MAP_TYPE_XSKMAP => {
            Some("an xskmap holds AF_XDP sockets, which the syscall side cannot read")
        }
        BPF_MAP_TYPE_PERF_EVENT_ARRAY => {
            Some("a perf event array is an event channel, not stored state")
        }
        BPF_MAP_TYPE_RINGBUF => {
            Some("a ring buffer's records are consumed by user space, not iterated")
        }
        BPF_MAP_TYPE_QUEUE | BPF_MAP_TYPE_STACK => {
            Some("a queue or stack can only be read by popping it")
        }
        BPF_MAP_TYPE_BLOOM_FILTER => Some("a bloom filter cannot be iterated"),
        _ => Some("this map type is not compared"),
    }
}

/// Entries that differ kept in full for the report; beyond it they are counted only.
pub(super) const MAX_LISTED_MISMATCHES: usize = 10_000;

/// Array elements compared in one block when the kernel's array is mapped.
pub(super) const BLOCK_ELEMENTS: usize = 4096;

/// Map types whose keys are the indices `0..max_entries`, all always present.
pub(super) fn is_index_keyed(map_type: u32) -> bool {
    matches!(map_type, BPF_MAP_TYPE_ARRAY | BPF_MAP_TYPE_PERCPU_ARRAY)
}

/// Calls `each(key, value)` for every entry of a kernel map: in batches where the map type has
/// batch operations, one key at a time where it does not (LPM tries). At most `max_entries`
/// entries are read.
pub(super) fn stream_kernel_entries(
    fd: std::os::fd::BorrowedFd<'_>,
    key_len: usize,
    value_len: usize,
    max_entries: u32,
    mut each: impl FnMut(&[u8], &[u8]),
) -> Result<(), i32> {
    // About 8 MiB of keys and values a batch.
    let chunk =
        ((8usize << 20) / (key_len + value_len).max(1)).clamp(1, max_entries.max(1) as usize);
    let mut seen = 0usize;
    let batched = kbpf::map_lookup_batches(fd, key_len, value_len, chunk, |n, keys, values| {
        for i in 0..n {
            each(
                &keys[i * key_len..(i + 1) * key_len],
                &values[i * value_len..(i + 1) * value_len],
            );
        }
        seen += n;
    });
    match batched {
        Ok(()) => Ok(()),
        // No batch operations for this map type: one entry at a time.
        Err(22 | 95 | 524) if seen == 0 => {
            let mut key: Option<Vec<u8>> = None;
            for _ in 0..=max_entries {
                let next = match kbpf::map_next_key_fd(fd, key.as_deref(), key_len) {
                    Ok(k) => k,
                    Err(2) => return Ok(()),
                    Err(e) => return Err(e),
                };
                match kbpf::map_lookup_fd(fd, &next, value_len) {
                    Ok(v) => each(&next, &v),
                    Err(2) => {}
                    Err(e) => return Err(e),
                }
                key = Some(next);
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A runtime's plain array map, in place.
pub(super) fn array_storage(
    rt: &XdpRuntime,
    index: usize,
) -> Option<bpfemu_vm::maps::ArrayStorage<'_>> {
    rt.maps()
        .get(index)
        .and_then(|m| m.array_storage(rt.memory()))
}

/// A runtime map's keys in `get_next_key` order (at most `max_entries + 1`).
pub(super) fn runtime_keys(
    rt: &XdpRuntime,
    index: usize,
    max_entries: u32,
) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut key: Option<Vec<u8>> = None;
    std::iter::from_fn(move || {
        let next = rt.maps().sys_next_key(index, key.as_deref()).ok()?;
        key = Some(next.clone());
        Some(next)
    })
    .take(max_entries as usize + 1)
}

/// One entry that differs before exclusions are known.
pub(super) struct Candidate {
    key: Vec<u8>,
    kernel: Option<Vec<u8>>,
    ours: Option<Vec<u8>>,
}

/// One map's comparison, fed entry by entry ([`MapComparison::entry`]) and judged at the end,
/// when every field that depends on the clock or random numbers is known.
pub(super) struct MapComparison<'a> {
    layout: &'a MapLayout,
    kernel_entries: usize,
    bpfemu_entries: usize,
    /// Entries byte-for-byte equal on both sides.
    equal_entries: usize,
    /// Fields tainted in some entry of bpfemu's, with what they depend on.
    tainted: BTreeMap<String, TaintSource>,
    /// What the key set depends on, when keys were inserted or deleted under taint.
    keys_tainted: Option<TaintSource>,
    candidates: Vec<Candidate>,
    /// Differing entries beyond [`MAX_LISTED_MISMATCHES`].
    unlisted: usize,
}

impl<'a> MapComparison<'a> {
    pub(super) fn new(layout: &'a MapLayout, keys_tainted: Option<TaintSource>) -> Self {
        MapComparison {
            layout,
            kernel_entries: 0,
            bpfemu_entries: 0,
            equal_entries: 0,
            tainted: BTreeMap::new(),
            keys_tainted,
            candidates: Vec::new(),
            unlisted: 0,
        }
    }

    /// One key: the kernel's value, bpfemu's (`None`: no such key), and the taint of each
    /// byte of bpfemu's (`None`: nothing tainted).
    pub(super) fn entry(
        &mut self,
        key: &[u8],
        kernel: Option<&[u8]>,
        ours: Option<&[u8]>,
        taint: Option<&[Option<TaintSource>]>,
    ) {
        self.kernel_entries += usize::from(kernel.is_some());
        self.bpfemu_entries += usize::from(ours.is_some());
        if let Some(taint) = taint {
            self.note_taint(taint);
        }
        if kernel.is_some() && kernel == ours {
            self.equal_entries += 1;
            return;
        }
        if self.candidates.len() < MAX_LISTED_MISMATCHES {
            self.candidates.push(Candidate {
                key: key.to_vec(),
                kernel: kernel.map(<[u8]>::to_vec),
                ours: ours.map(<[u8]>::to_vec),
            });
        } else {
            self.unlisted += 1;
        }
    }

    /// `n` entries equal byte for byte on both sides, with nothing tainted in them.
    pub(super) fn equal_block(&mut self, n: usize) {
        self.kernel_entries += n;
        self.bpfemu_entries += n;
        self.equal_entries += n;
    }

    /// Marks every field with a tainted byte in some CPU's copy.
    fn note_taint(&mut self, taint: &[Option<TaintSource>]) {
        let stride = self.layout.per_cpu_slot.unwrap_or(taint.len().max(1));
        for copy in taint.chunks(stride) {
            for leaf in &self.layout.leaves {
                let bytes = copy
                    .get(leaf.offset..leaf.offset + leaf.size)
                    .unwrap_or_default();
                if let Some(source) = bytes.iter().find_map(|t| *t) {
                    self.tainted.entry(leaf.path.clone()).or_insert(source);
                }
            }
        }
    }

    /// The report: differing entries judged field by field, with the excluded fields left out.
    pub(super) fn finish(self, name: &str, map_type: &str) -> MapReport {
        let excluded: BTreeMap<String, ExcludedField> = self
            .tainted
            .iter()
            .map(|(path, source)| {
                let field = ExcludedField {
                    field: path.clone(),
                    reason: format!("depends on {source}"),
                    entries_differing: 0,
                };
                (path.clone(), field)
            })
            .collect();
        let mut excluded = excluded;
        let mut mismatches = Vec::new();
        let mut equal_entries = self.equal_entries;
        for c in self.candidates {
            let (Some(k), Some(o)) = (&c.kernel, &c.ours) else {
                if self.keys_tainted.is_none() {
                    mismatches.push(EntryMismatch {
                        key: c.key,
                        kernel: c.kernel,
                        bpfemu: c.ours,
                        fields: Vec::new(),
                    });
                }
                continue;
            };
            let fields = self.layout.differing_fields(k, o, &mut excluded);
            if fields.is_empty() {
                equal_entries += 1;
            } else {
                mismatches.push(EntryMismatch {
                    key: c.key,
                    kernel: Some(k.clone()),
                    bpfemu: Some(o.clone()),
                    fields,
                });
            }
        }
        MapReport {
            name: name.to_owned(),
            map_type: map_type.to_owned(),
            compared: true,
            not_compared_reason: None,
            kernel_entries: self.kernel_entries,
            bpfemu_entries: self.bpfemu_entries,
            equal_entries,
            mismatches,
            unlisted_mismatches: self.unlisted,
            not_compared_fields: excluded.into_values().collect(),
            not_compared_keys: self.keys_tainted.map(|source| {
                format!(
                    "keys present on one side only are not judged: the key set depends on \
                     {source} (keys inserted or deleted under its taint)"
                )
            }),
        }
    }
}

impl MapLayout {
    /// The fields of two values that differ; those in `excluded` are counted there instead.
    fn differing_fields(
        &self,
        k: &[u8],
        o: &[u8],
        excluded: &mut BTreeMap<String, ExcludedField>,
    ) -> Vec<FieldDiff> {
        let mut fields = Vec::new();
        for ((cpu, ck), (_, co)) in self.copies(k).into_iter().zip(self.copies(o)) {
            for leaf in &self.leaves {
                let (fk, fo) = (field(ck, leaf), field(co, leaf));
                if fk == fo {
                    continue;
                }
                if let Some(e) = excluded.get_mut(&leaf.path) {
                    e.entries_differing += 1;
                    continue;
                }
                fields.push(FieldDiff {
                    field: leaf.path.clone(),
                    cpu,
                    kernel: fk.to_vec(),
                    bpfemu: fo.to_vec(),
                });
            }
        }
        if k.len() != o.len() {
            fields.push(FieldDiff {
                field: "(value length)".into(),
                cpu: None,
                kernel: (k.len() as u32).to_be_bytes().to_vec(),
                bpfemu: (o.len() as u32).to_be_bytes().to_vec(),
            });
        }
        fields
    }
}

pub(super) fn field<'a>(copy: &'a [u8], leaf: &Leaf) -> &'a [u8] {
    copy.get(leaf.offset..leaf.offset + leaf.size)
        .unwrap_or_default()
}

/// The text printed for a map's comparison.
pub fn format_map(report: &MapReport) -> String {
    let mut out = String::new();
    if !report.compared {
        writeln!(
            out,
            "map {} ({}): not compared: {}",
            report.name,
            report.map_type,
            report.not_compared_reason.as_deref().unwrap_or("")
        )
        .expect("string");
        return out;
    }
    writeln!(
        out,
        "map {} ({}): {} kernel entries, {} bpfemu entries, {} equal, {} mismatches",
        report.name,
        report.map_type,
        report.kernel_entries,
        report.bpfemu_entries,
        report.equal_entries,
        report.mismatches.len() + report.unlisted_mismatches
    )
    .expect("string");
    for e in &report.not_compared_fields {
        writeln!(
            out,
            "  not compared: field {}: {} ({} differing)",
            e.field, e.reason, e.entries_differing
        )
        .expect("string");
    }
    if let Some(keys) = &report.not_compared_keys {
        writeln!(out, "  not compared: {keys}").expect("string");
    }
    if report.unlisted_mismatches > 0 {
        writeln!(
            out,
            "  {} more entries differ (not listed)",
            report.unlisted_mismatches
        )
        .expect("string");
    }
    for m in &report.mismatches {
        match (&m.kernel, &m.bpfemu) {
            (Some(_), None) => {
                writeln!(out, "  MISMATCH key {}: only in the kernel", hex(&m.key))
            }
            (None, Some(_)) => writeln!(out, "  MISMATCH key {}: only in bpfemu", hex(&m.key)),
            _ => {
                writeln!(out, "  MISMATCH key {}:", hex(&m.key)).expect("string");
                for f in &m.fields {
                    let cpu = f.cpu.map_or(String::new(), |c| format!(" (cpu {c})"));
                    writeln!(
                        out,
                        "    {}{cpu}: kernel {}, bpfemu {}",
                        f.field,
                        hex(&f.kernel),
                        hex(&f.bpfemu)
                    )
                    .expect("string");
                }
                Ok(())
            }
        }
        .expect("string");
    }
    out
}
