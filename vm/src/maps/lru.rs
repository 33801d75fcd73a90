//! The LRU of LRU_HASH and LRU_PERCPU_HASH, modelled on kernel/bpf/bpf_lru_list.c so that the
//! same sequence of operations on the same virtual CPUs evicts the same elements.
//!
//! Every element (a slab slot) is a node on exactly one list: the common lists (free, active,
//! inactive) or, per CPU, a local free list and a local pending list (nodes handed out but
//! not yet flushed to the common lists). With `BPF_F_NO_COMMON_LRU` each CPU owns a complete
//! set of free/active/inactive lists instead. Lookups from programs set a node's reference
//! bit; rotation moves referenced nodes to the active list and unreferenced ones towards the
//! inactive tail, where shrinking evicts them.
//!
//! Lists are index-linked rings with one sentinel per list, so that moving a node is O(1)
//! and "head" and "tail" mean what they mean for the kernel's `list_head`.
//!
//! Determinism: the kernel's LRU is deterministic for one CPU at a time. What it cannot fix
//! is which CPU runs what, and the interleaving of concurrent CPUs; bpfemu takes the CPU
//! as a parameter of every operation and runs operations one after another.

/// The kernel's `LOCAL_FREE_TARGET`: the most nodes moved to a CPU's local free list at once.
const LOCAL_FREE_TARGET: u32 = 128;
/// `PERCPU_FREE_TARGET`: nodes one shrink frees for a per-CPU LRU.
const PERCPU_FREE_TARGET: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Free,
    Active,
    Inactive,
    LocalFree,
    LocalPending,
    /// Taken off every list (between popping and re-adding).
    Off,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    place: Place,
    referenced: bool,
    cpu: u32,
}

/// One set of common lists: sentinel ids, the active/inactive counts, and the inactive
/// rotation cursor (a link id: a node or the inactive sentinel).
#[derive(Clone, Debug)]
struct Lists {
    free: u32,
    active: u32,
    inactive: u32,
    active_count: u32,
    inactive_count: u32,
    next_rotation: u32,
}

#[derive(Clone, Debug)]
struct Local {
    free: u32,
    pending: u32,
    next_steal: u32,
}

/// The LRU state of one map. Node ids are slab slots.
#[derive(Debug)]
pub(crate) struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    nodes: Vec<Node>,
    /// One set (common LRU) or one per CPU (`BPF_F_NO_COMMON_LRU`).
    lists: Vec<Lists>,
    /// Per-CPU local lists of the common LRU; empty for a per-CPU LRU.
    locals: Vec<Local>,
    nr_scans: u32,
    target_free: u32,
    percpu: bool,
}

impl Lru {
    /// Builds the lists and puts every node on a free list, in the kernel's order.
    pub(crate) fn new(nodes: u32, ncpus: u32, percpu: bool) -> Lru {
        let mut lru = Lru {
            prev: Vec::new(),
            next: Vec::new(),
            nodes: vec![
                Node {
                    place: Place::Off,
                    referenced: false,
                    cpu: 0
                };
                nodes as usize
            ],
            lists: Vec::new(),
            locals: Vec::new(),
            nr_scans: if percpu {
                PERCPU_FREE_TARGET
            } else {
                LOCAL_FREE_TARGET
            },
            target_free: ((nodes / ncpus) / 2).clamp(1, LOCAL_FREE_TARGET),
            percpu,
        };
        lru.prev = (0..nodes).collect();
        lru.next = (0..nodes).collect();
        let sets = if percpu { ncpus } else { 1 };
        for _ in 0..sets {
            let lists = lru.new_lists();
            lru.lists.push(lists);
        }
        if !percpu {
            for cpu in 0..ncpus {
                let (free, pending) = (lru.sentinel(), lru.sentinel());
                lru.locals.push(Local {
                    free,
                    pending,
                    next_steal: cpu,
                });
            }
        }
        lru.populate(nodes, ncpus);
        lru
    }

    fn sentinel(&mut self) -> u32 {
        let id = self.prev.len() as u32;
        self.prev.push(id);
        self.next.push(id);
        id
    }

    fn new_lists(&mut self) -> Lists {
        let (free, active, inactive) = (self.sentinel(), self.sentinel(), self.sentinel());
        Lists {
            free,
            active,
            inactive,
            active_count: 0,
            inactive_count: 0,
            next_rotation: inactive,
        }
    }

    /// Common LRU: node 0 first onto the free list (so the last node is at its head).
    /// Per-CPU LRU: consecutive runs of `nodes / ncpus` nodes for each CPU in turn.
    fn populate(&mut self, nodes: u32, ncpus: u32) {
        let per_cpu = (nodes / ncpus).max(1);
        for id in 0..nodes {
            let set = if self.percpu {
                ((id / per_cpu).min(ncpus - 1)) as usize
            } else {
                0
            };
            self.nodes[id as usize] = Node {
                place: Place::Free,
                referenced: false,
                cpu: set as u32,
            };
            let head = self.lists[set].free;
            self.list_add(id, head);
        }
    }

    // ---- ring primitives ----

    fn list_add(&mut self, id: u32, head: u32) {
        let first = self.next[head as usize];
        self.next[id as usize] = first;
        self.prev[id as usize] = head;
        self.prev[first as usize] = id;
        self.next[head as usize] = id;
    }

    fn list_del(&mut self, id: u32) {
        let (p, n) = (self.prev[id as usize], self.next[id as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        self.prev[id as usize] = id;
        self.next[id as usize] = id;
    }

    fn list_move(&mut self, id: u32, head: u32) {
        self.list_del(id);
        self.list_add(id, head);
    }

    fn is_empty(&self, head: u32) -> bool {
        self.next[head as usize] == head
    }

    fn first(&self, head: u32) -> Option<u32> {
        let first = self.next[head as usize];
        (first != head).then_some(first)
    }

    fn node(&mut self, id: u32) -> &mut Node {
        &mut self.nodes[id as usize]
    }

    // ---- moves between lists of one set ----

    fn head_of(&self, set: usize, place: Place) -> u32 {
        let l = &self.lists[set];
        match place {
            Place::Free => l.free,
            Place::Active => l.active,
            Place::Inactive => l.inactive,
            _ => unreachable!("not a common list"),
        }
    }

    fn count(&mut self, set: usize, place: Place, delta: i32) {
        let l = &mut self.lists[set];
        match place {
            Place::Active => l.active_count = l.active_count.wrapping_add_signed(delta),
            Place::Inactive => l.inactive_count = l.inactive_count.wrapping_add_signed(delta),
            _ => {}
        }
    }

    /// Keeps the rotation cursor valid when its node leaves its position.
    fn step_cursor_off(&mut self, set: usize, id: u32) {
        if self.lists[set].next_rotation == id {
            self.lists[set].next_rotation = self.prev[id as usize];
        }
    }

    /// A node of set `set` goes to the head of a free list (common or local).
    fn move_to_free(&mut self, set: usize, id: u32, free_head: u32, place: Place) {
        self.step_cursor_off(set, id);
        let old = self.nodes[id as usize].place;
        self.count(set, old, -1);
        self.node(id).place = place;
        self.list_move(id, free_head);
    }

    /// A pending node joins the common lists, its reference bit cleared.
    fn move_in(&mut self, set: usize, id: u32, place: Place) {
        self.count(set, place, 1);
        *self.node(id) = Node {
            place,
            referenced: false,
            ..self.nodes[id as usize]
        };
        let head = self.head_of(set, place);
        self.list_move(id, head);
    }

    /// A node moves to the head of a common list (maybe its own), reference bit cleared.
    fn move_to(&mut self, set: usize, id: u32, place: Place) {
        let old = self.nodes[id as usize].place;
        if old != place {
            self.count(set, old, -1);
            self.count(set, place, 1);
        }
        *self.node(id) = Node {
            place,
            referenced: false,
            ..self.nodes[id as usize]
        };
        self.step_cursor_off(set, id);
        let head = self.head_of(set, place);
        self.list_move(id, head);
    }

    // ---- rotation and shrinking ----

    /// From the active tail: referenced nodes go back to the active head, others to the
    /// inactive head; at most `nr_scans` nodes, never past the original first node.
    fn rotate_active(&mut self, set: usize) {
        let head = self.lists[set].active;
        let first = self.next[head as usize];
        let mut cur = self.prev[head as usize];
        let mut scanned = 0;
        while cur != head {
            let before = self.prev[cur as usize];
            let to = if self.nodes[cur as usize].referenced {
                Place::Active
            } else {
                Place::Inactive
            };
            self.move_to(set, cur, to);
            scanned += 1;
            if scanned == self.nr_scans || cur == first {
                break;
            }
            cur = before;
        }
    }

    /// From the rotation cursor backwards: referenced inactive nodes move to the active list;
    /// the cursor remembers where the scan stopped.
    fn rotate_inactive(&mut self, set: usize) {
        let head = self.lists[set].inactive;
        if self.is_empty(head) {
            return;
        }
        let start = self.lists[set].next_rotation;
        let mut last = self.next[start as usize];
        if last == head {
            last = self.next[last as usize];
        }
        let (mut cur, mut before, mut scanned) = (start, head, 0);
        while scanned < self.nr_scans {
            if cur == head {
                cur = self.prev[cur as usize];
                continue;
            }
            before = self.prev[cur as usize];
            if self.nodes[cur as usize].referenced {
                self.move_to(set, cur, Place::Active);
            }
            if cur == last {
                break;
            }
            cur = before;
            scanned += 1;
        }
        self.lists[set].next_rotation = before;
    }

    fn rotate(&mut self, set: usize) {
        if self.lists[set].inactive_count < self.lists[set].active_count {
            self.rotate_active(set);
        }
        self.rotate_inactive(set);
    }

    /// From the inactive tail: referenced nodes get another chance on the active list,
    /// unreferenced ones are evicted onto `free_head`, up to `want` of them.
    fn shrink_inactive(
        &mut self,
        set: usize,
        want: u32,
        free_head: u32,
        place: Place,
        evict: &mut dyn FnMut(u32) -> bool,
    ) -> u32 {
        let head = self.lists[set].inactive;
        let (mut cur, mut freed, mut scanned) = (self.prev[head as usize], 0, 0);
        while cur != head {
            let before = self.prev[cur as usize];
            if self.nodes[cur as usize].referenced {
                self.move_to(set, cur, Place::Active);
            } else if evict(cur) {
                self.move_to_free(set, cur, free_head, place);
                freed += 1;
                if freed == want {
                    break;
                }
            }
            scanned += 1;
            if scanned == self.nr_scans {
                break;
            }
            cur = before;
        }
        freed
    }

    /// Shrinks the inactive list; when that frees nothing, evicts the oldest node of the
    /// inactive (or else the active) list regardless of its reference bit.
    fn shrink(
        &mut self,
        set: usize,
        want: u32,
        free_head: u32,
        place: Place,
        evict: &mut dyn FnMut(u32) -> bool,
    ) -> u32 {
        let freed = self.shrink_inactive(set, want, free_head, place, evict);
        if freed > 0 {
            return freed;
        }
        let l = &self.lists[set];
        let head = if self.is_empty(l.inactive) {
            l.active
        } else {
            l.inactive
        };
        let mut cur = self.prev[head as usize];
        while cur != head {
            let before = self.prev[cur as usize];
            if evict(cur) {
                self.move_to_free(set, cur, free_head, place);
                return 1;
            }
            cur = before;
        }
        0
    }

    // ---- the common LRU's local lists ----

    /// Pending nodes of a CPU join the common lists, oldest first.
    fn flush_pending(&mut self, cpu: usize) {
        let head = self.locals[cpu].pending;
        let mut cur = self.prev[head as usize];
        while cur != head {
            let before = self.prev[cur as usize];
            let to = if self.nodes[cur as usize].referenced {
                Place::Active
            } else {
                Place::Inactive
            };
            self.move_in(0, cur, to);
            cur = before;
        }
    }

    /// Refills a CPU's local free list from the common free list, evicting when short.
    fn refill_local(&mut self, cpu: usize, evict: &mut dyn FnMut(u32) -> bool) {
        self.flush_pending(cpu);
        self.rotate(0);
        let local_free = self.locals[cpu].free;
        let mut moved = 0;
        while let Some(id) = self.first(self.lists[0].free) {
            self.move_to_free(0, id, local_free, Place::LocalFree);
            moved += 1;
            if moved == self.target_free {
                break;
            }
        }
        if moved < self.target_free {
            self.shrink(
                0,
                self.target_free - moved,
                local_free,
                Place::LocalFree,
                evict,
            );
        }
    }

    fn pop_local_free(&mut self, cpu: usize) -> Option<u32> {
        let id = self.first(self.locals[cpu].free)?;
        self.list_del(id);
        self.node(id).place = Place::Off;
        Some(id)
    }

    /// Takes the oldest unreferenced pending node of a CPU (any, when all are referenced).
    fn pop_local_pending(&mut self, cpu: usize, evict: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        let head = self.locals[cpu].pending;
        for force in [false, true] {
            let mut cur = self.prev[head as usize];
            while cur != head {
                if (force || !self.nodes[cur as usize].referenced) && evict(cur) {
                    self.list_del(cur);
                    self.node(cur).place = Place::Off;
                    return Some(cur);
                }
                cur = self.prev[cur as usize];
            }
        }
        None
    }

    fn add_pending(&mut self, cpu: usize, id: u32) {
        *self.node(id) = Node {
            place: Place::LocalPending,
            referenced: false,
            cpu: cpu as u32,
        };
        let head = self.locals[cpu].pending;
        self.list_add(id, head);
    }

    fn common_pop_free(&mut self, cpu: usize, evict: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        let mut got = self.pop_local_free(cpu);
        if got.is_none() {
            self.refill_local(cpu, evict);
            got = self.pop_local_free(cpu);
        }
        if got.is_none() {
            got = self.steal(cpu, evict);
        }
        let id = got?;
        self.add_pending(cpu, id);
        Some(id)
    }

    /// Takes a node from the local lists of the CPUs in turn, starting at `next_steal`.
    fn steal(&mut self, cpu: usize, evict: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        let ncpus = self.locals.len() as u32;
        let first = self.locals[cpu].next_steal;
        let mut victim = first;
        let mut got = None;
        loop {
            got = got.or_else(|| self.pop_local_free(victim as usize));
            got = got.or_else(|| self.pop_local_pending(victim as usize, evict));
            victim = (victim + 1) % ncpus;
            if got.is_some() || victim == first {
                break;
            }
        }
        self.locals[cpu].next_steal = victim;
        got
    }

    fn percpu_pop_free(&mut self, cpu: usize, evict: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        self.rotate(cpu);
        let free = self.lists[cpu].free;
        if self.is_empty(free) {
            self.shrink(cpu, PERCPU_FREE_TARGET, free, Place::Free, evict);
        }
        let id = self.first(free)?;
        self.node(id).referenced = false;
        self.move_to(cpu, id, Place::Inactive);
        Some(id)
    }

    // ---- what the hash table calls ----

    /// A free node for a new element on `cpu`, evicting elements (through `evict`, which
    /// removes a node's element from the table and says whether it was there) if needed.
    pub(crate) fn pop_free(&mut self, cpu: u32, evict: &mut dyn FnMut(u32) -> bool) -> Option<u32> {
        if self.percpu {
            self.percpu_pop_free(cpu as usize, evict)
        } else {
            self.common_pop_free(cpu as usize, evict)
        }
    }

    /// Returns a node whose element was deleted, replaced or never inserted.
    pub(crate) fn push_free(&mut self, id: u32) {
        let node = self.nodes[id as usize];
        if self.percpu {
            self.move_to(node.cpu as usize, id, Place::Free);
        } else if node.place == Place::LocalPending {
            self.node(id).place = Place::LocalFree;
            self.node(id).referenced = false;
            let head = self.locals[node.cpu as usize].free;
            self.list_move(id, head);
        } else {
            self.move_to(0, id, Place::Free);
        }
    }

    /// Marks a node recently used (a lookup from a program).
    pub(crate) fn set_ref(&mut self, id: u32) {
        self.node(id).referenced = true;
    }
}
