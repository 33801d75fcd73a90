//! LPM_TRIE (kernel/bpf/lpm_trie.c): longest-prefix match over keys `struct
//! bpf_lpm_trie_key_u8 { u32 prefixlen; u8 data[]; }`, bits numbered from the most
//! significant bit of `data[0]` (network order for addresses).
//!
//! The trie has the kernel's exact shape (path-compressed binary trie, with intermediate
//! nodes where two prefixes diverge and no stored prefix exists), so that `get_next_key`
//! answers as the kernel's does: post-order, bit 0 before bit 1, more specific prefixes
//! before the prefixes that contain them, including its handling of keys not in the trie.
//! Values are slab slots; a trie with `max_entries` elements has one spare slot because a
//! replacement allocates the new node before it frees the old one.

use super::slab::{Slab, SlabLayout};
use super::spec::{BPF_EXIST, BPF_NOEXIST, MapSpec};
use super::{Errno, MapResult};
use crate::memory::{Memory, RegionKind};

#[derive(Clone, Debug)]
struct Node {
    prefixlen: u32,
    data: Vec<u8>,
    /// The value slot; `None` for an intermediate node.
    slot: Option<u32>,
    child: [Option<u32>; 2],
}

/// Where a node hangs: the root pointer or a child pointer of a node.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Link {
    Root,
    Child(u32, usize),
}

#[derive(Debug)]
pub(crate) struct LpmTrie {
    nodes: Vec<Node>,
    spare_nodes: Vec<u32>,
    root: Option<u32>,
    slab: Slab,
    free_slots: Vec<u32>,
    entries: u32,
    max_entries: u32,
    data_size: usize,
}

/// A parsed key: prefix length and data.
struct Key<'a> {
    prefixlen: u32,
    data: &'a [u8],
}

fn parse(key: &[u8]) -> Key<'_> {
    Key {
        prefixlen: u32::from_ne_bytes(key[..4].try_into().expect("LPM keys start with a u32")),
        data: &key[4..],
    }
}

fn bit(data: &[u8], index: u32) -> usize {
    ((data[index as usize / 8] >> (7 - index % 8)) & 1) as usize
}

/// Leading bits `a` and `b` share. Compared 8 bytes, then 4, then 1 at a time, as big-endian
/// words (whose leading zeros are the bits in order): a lookup compares a key with every
/// node on its path.
fn common_bits(a: &[u8], b: &[u8]) -> u32 {
    let len = a.len().min(b.len());
    let (mut a, mut b) = (&a[..len], &b[..len]);
    let mut bits = 0;
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        let diff = u64::from_be_bytes(*x) ^ u64::from_be_bytes(*y);
        if diff != 0 {
            return bits + diff.leading_zeros();
        }
        (a, b, bits) = (rest_a, rest_b, bits + 64);
    }
    if let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<4>(), b.split_first_chunk::<4>())
    {
        let diff = u32::from_be_bytes(*x) ^ u32::from_be_bytes(*y);
        if diff != 0 {
            return bits + diff.leading_zeros();
        }
        (a, b, bits) = (rest_a, rest_b, bits + 32);
    }
    for (x, y) in a.iter().zip(b) {
        let diff = x ^ y;
        if diff != 0 {
            return bits + diff.leading_zeros();
        }
        bits += 8;
    }
    bits
}

impl LpmTrie {
    pub(crate) fn new(mem: &mut Memory, spec: &MapSpec) -> LpmTrie {
        let slots = spec.max_entries + 1;
        let layout = SlabLayout {
            slots,
            value_size: spec.value_size as usize,
            copies: 1,
            lock_off: None,
        };
        let kind = RegionKind::MapValue {
            map: spec.name.clone(),
        };
        LpmTrie {
            nodes: Vec::new(),
            spare_nodes: Vec::new(),
            root: None,
            slab: Slab::new(mem, kind, layout, true),
            free_slots: (0..slots).rev().collect(),
            entries: 0,
            max_entries: spec.max_entries,
            data_size: spec.key_size as usize - 4,
        }
    }

    fn max_prefixlen(&self) -> u32 {
        self.data_size as u32 * 8
    }

    fn node(&self, id: u32) -> &Node {
        &self.nodes[id as usize]
    }

    /// The kernel's `longest_prefix_match`: bits of the node's prefix the key matches,
    /// at most either prefix length.
    fn matchlen(&self, id: u32, key: &Key) -> u32 {
        let node = self.node(id);
        common_bits(&node.data, key.data)
            .min(node.prefixlen)
            .min(key.prefixlen)
    }

    fn get(&self, link: Link) -> Option<u32> {
        match link {
            Link::Root => self.root,
            Link::Child(id, dir) => self.node(id).child[dir],
        }
    }

    fn set(&mut self, link: Link, to: Option<u32>) {
        match link {
            Link::Root => self.root = to,
            Link::Child(id, dir) => self.nodes[id as usize].child[dir] = to,
        }
    }

    fn alloc_node(&mut self, node: Node) -> u32 {
        match self.spare_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() as u32 - 1
            }
        }
    }

    fn free_node(&mut self, id: u32) {
        if let Some(slot) = self.nodes[id as usize].slot.take() {
            self.free_slots.push(slot);
        }
        self.spare_nodes.push(id);
    }

    /// Longest-prefix match: the slot of the most specific stored prefix of the key.
    fn find(&self, key: &Key) -> Option<u32> {
        if key.prefixlen > self.max_prefixlen() {
            return None;
        }
        let (mut cur, mut found) = (self.root, None);
        while let Some(id) = cur {
            let m = self.matchlen(id, key);
            let node = self.node(id);
            if m == self.max_prefixlen() {
                return node.slot.or(found);
            }
            if m < node.prefixlen {
                break;
            }
            found = node.slot.or(found);
            cur = node.child[bit(key.data, node.prefixlen)];
        }
        found
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<u64> {
        self.find(&parse(key)).map(|slot| self.slab.addr(0, slot))
    }

    pub(crate) fn sys_lookup(&self, mem: &Memory, key: &[u8]) -> MapResult<Vec<u8>> {
        let slot = self.find(&parse(key)).ok_or(Errno::ENOENT)?;
        Ok(self.slab.read(mem, 0, slot).to_vec())
    }

    /// `trie_check_add_elem`: a new element needs room and a flag that allows creating.
    fn check_add(&mut self, flags: u64) -> MapResult<()> {
        if flags == BPF_EXIST {
            return Err(Errno::ENOENT);
        }
        if self.entries == self.max_entries {
            return Err(Errno::ENOSPC);
        }
        self.entries += 1;
        Ok(())
    }

    pub(crate) fn update(
        &mut self,
        mem: &mut Memory,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> MapResult<()> {
        let key = parse(key);
        if flags > BPF_EXIST || key.prefixlen > self.max_prefixlen() {
            return Err(Errno::EINVAL);
        }
        let slot = self
            .free_slots
            .pop()
            .expect("one slot more than max_entries");
        self.slab.write(mem, 0, slot, value);
        let new = Node {
            prefixlen: key.prefixlen,
            data: key.data.to_vec(),
            slot: Some(slot),
            child: [None, None],
        };
        let result = self.attach(new, &key, flags);
        if result.is_err() {
            self.free_slots.push(slot);
        }
        result
    }

    /// Walks down as far as the key matches and links the new node in: into an empty
    /// child, in place of a node with the same prefix, above a node it contains, or under a
    /// new intermediate node where the two diverge.
    fn attach(&mut self, new: Node, key: &Key, flags: u64) -> MapResult<()> {
        let mut link = Link::Root;
        let mut m = 0;
        while let Some(id) = self.get(link) {
            m = self.matchlen(id, key);
            let plen = self.node(id).prefixlen;
            if plen != m || plen == key.prefixlen {
                break;
            }
            link = Link::Child(id, bit(key.data, plen));
        }
        let Some(id) = self.get(link) else {
            self.check_add(flags)?;
            let new = self.alloc_node(new);
            self.set(link, Some(new));
            return Ok(());
        };
        if self.node(id).prefixlen == m {
            return self.replace(link, id, new, flags);
        }
        self.check_add(flags)?;
        let new_bits = new.data.clone();
        let new = self.alloc_node(new);
        if m == key.prefixlen {
            let dir = bit(&self.node(id).data, m);
            self.nodes[new as usize].child[dir] = Some(id);
            self.set(link, Some(new));
            return Ok(());
        }
        let mut im = Node {
            prefixlen: m,
            data: self.node(id).data.clone(),
            slot: None,
            child: [None, None],
        };
        let dir = bit(&new_bits, m);
        im.child[dir] = Some(new);
        im.child[1 - dir] = Some(id);
        let im = self.alloc_node(im);
        self.set(link, Some(im));
        Ok(())
    }

    /// The key's prefix has a node already: a stored element (replaced unless BPF_NOEXIST)
    /// or an intermediate node (which becomes an element).
    fn replace(&mut self, link: Link, id: u32, mut new: Node, flags: u64) -> MapResult<()> {
        if self.node(id).slot.is_some() {
            if flags == BPF_NOEXIST {
                return Err(Errno::EEXIST);
            }
        } else {
            self.check_add(flags)?;
        }
        new.child = self.node(id).child;
        let new = self.alloc_node(new);
        self.set(link, Some(new));
        self.free_node(id);
        Ok(())
    }

    pub(crate) fn delete(&mut self, key: &[u8]) -> MapResult<()> {
        let key = parse(key);
        if key.prefixlen > self.max_prefixlen() {
            return Err(Errno::EINVAL);
        }
        let (mut link, mut parent_link, mut parent) = (Link::Root, Link::Root, None);
        let mut m = 0;
        while let Some(id) = self.get(link) {
            m = self.matchlen(id, &key);
            let plen = self.node(id).prefixlen;
            if plen != m || plen == key.prefixlen {
                break;
            }
            parent = Some(id);
            parent_link = link;
            link = Link::Child(id, bit(key.data, plen));
        }
        let id = match self.get(link) {
            Some(id)
                if self.node(id).prefixlen == key.prefixlen
                    && m == key.prefixlen
                    && self.node(id).slot.is_some() =>
            {
                id
            }
            _ => return Err(Errno::ENOENT),
        };
        self.entries -= 1;
        self.unlink(id, link, parent, parent_link);
        Ok(())
    }

    /// Removes a stored node, keeping every intermediate node with exactly two children.
    fn unlink(&mut self, id: u32, link: Link, parent: Option<u32>, parent_link: Link) {
        let [left, right] = self.node(id).child;
        if left.is_some() && right.is_some() {
            let slot = self.nodes[id as usize].slot.take().expect("a stored node");
            self.free_slots.push(slot);
            return;
        }
        let leaf = left.is_none() && right.is_none();
        if let Some(p) = parent.filter(|p| leaf && self.node(*p).slot.is_none()) {
            let [pl, pr] = self.node(p).child;
            let sibling = if pl == Some(id) { pr } else { pl };
            self.set(parent_link, sibling);
            self.free_node(p);
            self.free_node(id);
            return;
        }
        self.set(link, left.or(right));
        self.free_node(id);
    }

    fn key_of(&self, id: u32) -> Vec<u8> {
        let node = self.node(id);
        let mut key = node.prefixlen.to_ne_bytes().to_vec();
        key.extend_from_slice(&node.data);
        key
    }

    /// The first stored node in post-order under `root`.
    fn leftmost(&self, root: u32) -> u32 {
        let (mut cur, mut found) = (Some(root), root);
        while let Some(id) = cur {
            let node = self.node(id);
            if node.slot.is_none() {
                cur = node.child[0];
            } else {
                found = id;
                cur = node.child[0].or(node.child[1]);
            }
        }
        found
    }

    /// `trie_get_next_key`: the post-order successor of the node the key names; the first
    /// node when the key is absent or invalid.
    pub(crate) fn next_key(&self, key: Option<&[u8]>) -> MapResult<Vec<u8>> {
        let root = self.root.ok_or(Errno::ENOENT)?;
        let key = key
            .map(parse)
            .filter(|k| k.prefixlen <= self.max_prefixlen());
        let Some(key) = key else {
            return Ok(self.key_of(self.leftmost(root)));
        };
        let mut stack = Vec::new();
        let mut cur = Some(root);
        while let Some(id) = cur {
            stack.push(id);
            let plen = self.node(id).prefixlen;
            if plen != self.matchlen(id, &key) || plen == key.prefixlen {
                break;
            }
            cur = self.node(id).child[bit(key.data, plen)];
        }
        let exact = cur.is_some_and(|id| {
            let node = self.node(id);
            node.prefixlen == key.prefixlen
                && self.matchlen(id, &key) == node.prefixlen
                && node.slot.is_some()
        });
        if !exact {
            return Ok(self.key_of(self.leftmost(root)));
        }
        self.successor(&stack)
    }

    /// The next stored node in post-order after the last node of `stack` (a root path).
    fn successor(&self, stack: &[u32]) -> MapResult<Vec<u8>> {
        let mut node = *stack.last().expect("non-empty path");
        for &parent in stack[..stack.len() - 1].iter().rev() {
            let [left, right] = self.node(parent).child;
            if let (true, Some(right)) = (left == Some(node), right) {
                return Ok(self.key_of(self.leftmost(right)));
            }
            if self.node(parent).slot.is_some() {
                return Ok(self.key_of(parent));
            }
            node = parent;
        }
        Err(Errno::ENOENT)
    }

    pub(crate) fn len(&self) -> u32 {
        self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leading equal bits, one bit at a time.
    fn common_bits_bitwise(a: &[u8], b: &[u8]) -> u32 {
        let bits = a.len().min(b.len()) as u32 * 8;
        (0..bits).find(|&i| bit(a, i) != bit(b, i)).unwrap_or(bits)
    }

    #[test]
    fn common_bits_counts_every_leading_equal_bit() {
        for len in 0..=20usize {
            let a: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            assert_eq!(common_bits(&a, &a), len as u32 * 8);
            for flip in 0..len * 8 {
                let mut b = a.clone();
                b[flip / 8] ^= 0x80 >> (flip % 8);
                assert_eq!(common_bits(&a, &b), flip as u32, "len {len} flip {flip}");
                assert_eq!(common_bits(&a, &b), common_bits_bitwise(&a, &b));
            }
            // Keys of different lengths compare over the shorter.
            assert_eq!(common_bits(&a, &a[..len / 2]), (len / 2) as u32 * 8);
        }
    }
}
