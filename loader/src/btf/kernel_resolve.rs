//! `btf_check_all_types`' resolve pass as `BPF_BTF_LOAD` runs it on the blob libbpf sends:
//! every type that refers to others is resolved, depth first, and refused when what it refers
//! to cannot be what it needs (a modifier of a VAR, an array of a bitfield INT, a decl tag on
//! a pointer, a type that contains itself). Only the verdict and the first refused type
//! matter to bpfemu; the rules a single type carries are `kernel_meta`'s.

use super::types::{Btf, BtfKind, TypeId};

/// `MAX_RESOLVE_DEPTH`.
const MAX_DEPTH: usize = 32;

/// What a resolve started from decides to follow (`enum resolve_mode`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Not decided yet: whatever needs resolving is followed.
    Any,
    /// From a pointer: only modifiers and pointers are followed.
    Pointer,
    /// From a struct, union or array: modifiers, arrays, structs and unions are followed.
    Aggregate,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Visit {
    New,
    OnStack,
    Resolved,
}

/// Why the kernel refuses a type: its id and the rule.
type Refusal = (TypeId, &'static str);

/// The first type `BPF_BTF_LOAD`'s resolve pass refuses, as "[id] rule".
pub(crate) fn resolve_refusal(btf: &Btf) -> Option<String> {
    let mut r = Resolver {
        btf,
        visit: vec![Visit::New; btf.types.len()],
        mode: Mode::Any,
        depth: 0,
    };
    for id in 1..btf.types.len() as TypeId {
        let kind = &btf.types[id as usize].kind;
        let outcome = if needs_resolve(kind) && r.visit[id as usize] != Visit::Resolved {
            r.resolve_from_scratch(id)
        } else {
            Ok(())
        };
        let outcome = outcome.and_then(|()| match kind {
            BtfKind::FuncProto { .. } => r.check_func_proto(id),
            _ => Ok(()),
        });
        if let Err((id, rule)) = outcome {
            return Some(format!("[{id}] {rule}"));
        }
    }
    None
}

/// `btf_type_is_modifier`: the kernel counts typedefs among them.
fn is_modifier(kind: &BtfKind) -> bool {
    kind.is_modifier() || matches!(kind, BtfKind::Typedef { .. })
}

fn is_aggregate(kind: &BtfKind) -> bool {
    matches!(kind, BtfKind::Struct { .. } | BtfKind::Union { .. })
}

/// `btf_type_needs_resolve`.
fn needs_resolve(kind: &BtfKind) -> bool {
    is_modifier(kind)
        || is_aggregate(kind)
        || matches!(
            kind,
            BtfKind::Ptr { .. }
                | BtfKind::Array { .. }
                | BtfKind::Var { .. }
                | BtfKind::Func { .. }
                | BtfKind::DeclTag { .. }
                | BtfKind::DataSec { .. }
        )
}

/// `btf_type_is_resolve_source_only`: what nothing may refer to as a type.
fn source_only(kind: &BtfKind) -> bool {
    matches!(
        kind,
        BtfKind::Var { .. } | BtfKind::DeclTag { .. } | BtfKind::DataSec { .. }
    )
}

/// What a modifier, pointer, variable or prototype may name: anything but a variable, a
/// DATASEC or a decl tag.
fn is_a_type(kind: &BtfKind) -> bool {
    !source_only(kind)
}

/// What an array or a member may be made of (`btf_type_nosize_or_null` and source-only types
/// refused).
fn is_a_sized_type(kind: &BtfKind) -> bool {
    !no_size(kind) && !source_only(kind)
}

/// `btf_type_nosize`.
fn no_size(kind: &BtfKind) -> bool {
    matches!(
        kind,
        BtfKind::Void
            | BtfKind::Fwd { .. }
            | BtfKind::Func { .. }
            | BtfKind::FuncProto { .. }
            | BtfKind::DeclTag { .. }
    )
}

struct Resolver<'a> {
    btf: &'a Btf,
    visit: Vec<Visit>,
    mode: Mode,
    depth: usize,
}

impl Resolver<'_> {
    fn kind(&self, id: TypeId) -> Option<&BtfKind> {
        self.btf.get(id).map(|t| &t.kind)
    }

    /// `to` exists and is a kind `allowed` takes; else `from` is refused by `rule`.
    fn expect(
        &self,
        from: TypeId,
        to: TypeId,
        allowed: fn(&BtfKind) -> bool,
        rule: &'static str,
    ) -> Result<(), Refusal> {
        match self.kind(to) {
            Some(k) if allowed(k) => Ok(()),
            _ => Err((from, rule)),
        }
    }

    /// `env_type_is_resolve_sink`: what the current mode does not follow.
    fn is_sink(&self, kind: &BtfKind) -> bool {
        match self.mode {
            Mode::Any => !needs_resolve(kind),
            Mode::Pointer => !is_modifier(kind) && !matches!(kind, BtfKind::Ptr { .. }),
            Mode::Aggregate => {
                !is_modifier(kind) && !is_aggregate(kind) && !matches!(kind, BtfKind::Array { .. })
            }
        }
    }

    /// Resolves `next` first when the mode follows it and it is not resolved yet.
    fn follow(&mut self, next: TypeId) -> Result<(), Refusal> {
        let Some(kind) = self.kind(next) else {
            return Ok(());
        };
        if self.is_sink(kind) || self.visit[next as usize] == Visit::Resolved {
            return Ok(());
        }
        self.resolve(next)
    }

    /// `env_stack_push` and the type's `resolve` until it is resolved.
    fn resolve(&mut self, id: TypeId) -> Result<(), Refusal> {
        match self.visit[id as usize] {
            Visit::Resolved => return Ok(()),
            // The caller is the one resolving: the kernel names the type on top of its stack.
            Visit::OnStack => return Err((id, "Loop detected")),
            Visit::New => {}
        }
        if self.depth == MAX_DEPTH {
            return Err((id, "Exceeded max resolving depth"));
        }
        let kind = &self.btf.types[id as usize].kind;
        if self.mode == Mode::Any {
            if matches!(kind, BtfKind::Ptr { .. }) {
                self.mode = Mode::Pointer;
            } else if is_aggregate(kind) || matches!(kind, BtfKind::Array { .. }) {
                self.mode = Mode::Aggregate;
            }
        }
        self.visit[id as usize] = Visit::OnStack;
        self.depth += 1;
        let outcome = self.resolve_kind(id, kind);
        self.depth -= 1;
        outcome?;
        self.visit[id as usize] = Visit::Resolved;
        Ok(())
    }

    fn resolve_kind(&mut self, id: TypeId, kind: &BtfKind) -> Result<(), Refusal> {
        match kind {
            BtfKind::Ptr { ty } => self.reference(id, *ty),
            k if is_modifier(k) => self.reference(id, k.referenced().unwrap_or(0)),
            BtfKind::Var { ty, .. } => self.var(id, *ty),
            BtfKind::Array { elem, index, len } => self.array(id, *elem, *index, *len),
            BtfKind::Struct { members, .. } | BtfKind::Union { members, .. } => {
                for m in members {
                    self.expect(id, m.ty, is_a_sized_type, "Invalid member")?;
                    self.follow(m.ty)?;
                }
                Ok(())
            }
            BtfKind::DataSec { vars, .. } => {
                self.mode = Mode::Any;
                for v in vars {
                    if !matches!(self.kind(v.ty), Some(BtfKind::Var { .. })) {
                        return Err((id, "Not a VAR kind member"));
                    }
                    self.follow(v.ty)?;
                    let var_type = self.kind(v.ty).and_then(BtfKind::referenced).unwrap_or(0);
                    match self.size(var_type) {
                        None => return Err((id, "Invalid type")),
                        Some(size) if u64::from(v.size) < size => return Err((id, "Invalid size")),
                        Some(_) => {}
                    }
                }
                Ok(())
            }
            BtfKind::DeclTag { ty, component_idx } => self.decl_tag(id, *ty, *component_idx),
            // `btf_func_resolve`: the prototype's own checks are `btf_func_proto_check`'s.
            _ => Ok(()),
        }
    }

    /// `btf_modifier_resolve` and `btf_ptr_resolve`: the target is a type, resolved first
    /// where the mode follows it, and has a size unless it is void, a forward declaration
    /// or a function prototype.
    fn reference(&mut self, id: TypeId, next: TypeId) -> Result<(), Refusal> {
        self.expect(id, next, is_a_type, "Invalid type_id")?;
        self.follow(next)?;
        self.follow_resolved_pointer(next)?;
        if self.size(next).is_none() {
            let base = self.base(next);
            let allowed = matches!(
                self.kind(base),
                Some(BtfKind::Void | BtfKind::Fwd { .. } | BtfKind::FuncProto { .. })
            );
            if !allowed {
                return Err((id, "Invalid type_id"));
            }
        }
        Ok(())
    }

    /// A modifier that ends in a pointer: the pointer is resolved too.
    fn follow_resolved_pointer(&mut self, next: TypeId) -> Result<(), Refusal> {
        if !self.kind(next).is_some_and(is_modifier) {
            return Ok(());
        }
        let base = self.base(next);
        if matches!(self.kind(base), Some(BtfKind::Ptr { .. })) {
            self.follow(base)?;
        }
        Ok(())
    }

    /// `btf_var_resolve`: the variable's type has a size.
    fn var(&mut self, id: TypeId, next: TypeId) -> Result<(), Refusal> {
        self.expect(id, next, is_a_type, "Invalid type_id")?;
        self.follow(next)?;
        self.follow_resolved_pointer(next)?;
        match self.size(next) {
            Some(_) => Ok(()),
            None => Err((id, "Invalid type_id")),
        }
    }

    /// `btf_array_resolve`.
    fn array(&mut self, id: TypeId, elem: TypeId, index: TypeId, len: u32) -> Result<(), Refusal> {
        self.expect(id, index, is_a_sized_type, "Invalid index")?;
        self.follow(index)?;
        if !self.is_regular_int(self.base(index)) {
            return Err((id, "Invalid index"));
        }
        self.expect(id, elem, is_a_sized_type, "Invalid elem")?;
        self.follow(elem)?;
        let Some(elem_size) = self.size(elem) else {
            return Err((id, "Invalid elem"));
        };
        let base = self.base(elem);
        if matches!(self.kind(base), Some(BtfKind::Int { .. })) && !self.is_regular_int(base) {
            return Err((id, "Invalid array of int"));
        }
        if len != 0 && elem_size > u64::from(u32::MAX / len) {
            return Err((id, "Array size overflows U32_MAX"));
        }
        Ok(())
    }

    /// `btf_decl_tag_resolve`: a tag goes on a function, struct, union, variable or typedef,
    /// and a component (`component_idx` >= 0) is a member or a parameter that exists.
    fn decl_tag(&mut self, id: TypeId, next: TypeId, component_idx: i32) -> Result<(), Refusal> {
        let target = self.kind(next);
        let is_target = matches!(
            target,
            Some(
                BtfKind::Func { .. }
                    | BtfKind::Struct { .. }
                    | BtfKind::Union { .. }
                    | BtfKind::Var { .. }
                    | BtfKind::Typedef { .. }
            )
        );
        if !is_target {
            return Err((id, "Invalid type_id"));
        }
        self.follow(next)?;
        if component_idx == -1 {
            return Ok(());
        }
        let count = match self.kind(next) {
            Some(BtfKind::Struct { members, .. } | BtfKind::Union { members, .. }) => members.len(),
            Some(BtfKind::Func { proto, .. }) => match self.kind(*proto) {
                Some(BtfKind::FuncProto { params, .. }) => params.len(),
                _ => 0,
            },
            // A variable or a typedef has no components.
            _ => 0,
        };
        if component_idx as u32 as usize >= count {
            return Err((id, "Invalid component_idx"));
        }
        Ok(())
    }

    /// `btf_func_proto_check`: the return type and every argument (a last void one is `...`)
    /// resolve to a type with a size.
    fn check_func_proto(&mut self, id: TypeId) -> Result<(), Refusal> {
        let Some(BtfKind::FuncProto { ret, params }) = self.kind(id) else {
            return Ok(());
        };
        let (ret, params) = (*ret, params.clone());
        if ret != 0 {
            self.expect(id, ret, is_a_type, "Invalid return type")?;
            self.resolve_from_scratch(ret)?;
            if self.size(ret).is_none() {
                return Err((id, "Invalid return type"));
            }
        }
        let mut params = &params[..];
        if let Some((last, rest)) = params.split_last()
            && last.ty == 0
        {
            if !last.name.is_empty() {
                return Err((id, arg_rule(params.len())));
            }
            params = rest;
        }
        for (i, p) in params.iter().enumerate() {
            self.expect(id, p.ty, is_a_type, arg_rule(i + 1))?;
            self.resolve_from_scratch(p.ty)?;
            if self.size(p.ty).is_none() {
                return Err((id, arg_rule(i + 1)));
            }
        }
        Ok(())
    }

    /// `btf_resolve` of a type a prototype names, when it needs it.
    fn resolve_from_scratch(&mut self, id: TypeId) -> Result<(), Refusal> {
        let needs = self.kind(id).is_some_and(needs_resolve);
        if !needs || self.visit[id as usize] == Visit::Resolved {
            return Ok(());
        }
        self.mode = Mode::Any;
        self.depth = 0;
        // A loop or a chain too deep is logged against the type the resolve started from.
        self.resolve(id).map_err(|(at, rule)| match rule {
            "Loop detected" | "Exceeded max resolving depth" => (id, rule),
            _ => (at, rule),
        })
    }

    /// Through modifiers and typedefs to the type they modify (`id` itself on a loop, which
    /// the resolve refuses).
    fn base(&self, id: TypeId) -> TypeId {
        self.btf.skip_mods_and_typedefs(id).unwrap_or(id)
    }

    /// `btf_type_id_size`: the size of `id` through modifiers and variables, `None` for
    /// void, forward declarations, functions, prototypes and decl tags.
    fn size(&self, id: TypeId) -> Option<u64> {
        let mut id = id;
        if let Some(BtfKind::Var { ty, .. }) = self.kind(id) {
            id = *ty;
        }
        let base = self.base(id);
        let kind = self.kind(base)?;
        match kind {
            k if no_size(k) || is_modifier(k) => None,
            BtfKind::Ptr { .. } => Some(8),
            BtfKind::Array { .. } => self.btf.size_of(base).map(u64::from).or(Some(0)),
            BtfKind::Var { .. } => None,
            k => k.declared_size().map(u64::from),
        }
    }

    /// `btf_type_int_is_regular`: whole bytes from bit 0, 1, 2, 4, 8 or 16 of them (its bits
    /// decide, not its size).
    fn is_regular_int(&self, id: TypeId) -> bool {
        match self.kind(id) {
            Some(BtfKind::Int {
                bit_offset, bits, ..
            }) => *bit_offset == 0 && bits % 8 == 0 && matches!(bits / 8, 1 | 2 | 4 | 8 | 16),
            _ => false,
        }
    }
}

/// "Invalid arg#N", numbered from 1 as the kernel numbers them.
fn arg_rule(n: usize) -> &'static str {
    const RULES: [&str; 8] = [
        "Invalid arg#1",
        "Invalid arg#2",
        "Invalid arg#3",
        "Invalid arg#4",
        "Invalid arg#5",
        "Invalid arg#6",
        "Invalid arg#7",
        "Invalid arg#8",
    ];
    RULES
        .get(n.wrapping_sub(1))
        .copied()
        .unwrap_or("Invalid arg")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{BtfType, IntEncoding, Linkage, Member};

    fn ty(name: &str, kind: BtfKind) -> BtfType {
        BtfType {
            name: name.into(),
            kind,
        }
    }

    fn int(bits: u8) -> BtfKind {
        BtfKind::Int {
            size: 4,
            encoding: IntEncoding::default(),
            bit_offset: 0,
            bits,
        }
    }

    fn btf(types: Vec<BtfType>) -> Btf {
        Btf {
            types: std::iter::once(ty("", BtfKind::Void))
                .chain(types)
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn well_formed_types_resolve() {
        let b = btf(vec![
            ty("int", int(32)),
            ty("", BtfKind::Ptr { ty: 3 }),
            ty(
                "node",
                BtfKind::Struct {
                    size: 12,
                    members: vec![
                        Member {
                            name: "next".into(),
                            ty: 2,
                            bit_offset: 0,
                            bitfield_size: 0,
                        },
                        Member {
                            name: "v".into(),
                            ty: 1,
                            bit_offset: 64,
                            bitfield_size: 0,
                        },
                    ],
                },
            ),
            ty(
                "",
                BtfKind::Array {
                    elem: 1,
                    index: 1,
                    len: 4,
                },
            ),
        ]);
        assert_eq!(resolve_refusal(&b), None);
    }

    #[test]
    fn a_typedef_of_itself_is_a_loop() {
        let b = btf(vec![
            ty("a", BtfKind::Typedef { ty: 2 }),
            ty("", BtfKind::Const { ty: 1 }),
        ]);
        assert_eq!(resolve_refusal(&b).as_deref(), Some("[1] Loop detected"));
    }

    #[test]
    fn an_array_of_a_bitfield_int_is_refused() {
        let b = btf(vec![
            ty("int", int(32)),
            ty("bits", int(3)),
            ty(
                "",
                BtfKind::Array {
                    elem: 2,
                    index: 1,
                    len: 4,
                },
            ),
        ]);
        assert_eq!(
            resolve_refusal(&b).as_deref(),
            Some("[3] Invalid array of int")
        );
    }

    #[test]
    fn references_to_variables_and_tags_on_pointers_are_refused() {
        let var = ty(
            "v",
            BtfKind::Var {
                ty: 1,
                linkage: Linkage::Global,
            },
        );
        let to_var = btf(vec![
            ty("int", int(32)),
            var.clone(),
            ty("", BtfKind::Ptr { ty: 2 }),
        ]);
        assert_eq!(
            resolve_refusal(&to_var).as_deref(),
            Some("[3] Invalid type_id")
        );
        let tag_on_ptr = btf(vec![
            ty("int", int(32)),
            ty("", BtfKind::Ptr { ty: 1 }),
            ty(
                "tag",
                BtfKind::DeclTag {
                    ty: 2,
                    component_idx: -1,
                },
            ),
        ]);
        assert_eq!(
            resolve_refusal(&tag_on_ptr).as_deref(),
            Some("[3] Invalid type_id")
        );
        let past_the_members = btf(vec![
            ty("int", int(32)),
            var,
            ty(
                "tag",
                BtfKind::DeclTag {
                    ty: 2,
                    component_idx: 0,
                },
            ),
        ]);
        assert_eq!(
            resolve_refusal(&past_the_members).as_deref(),
            Some("[3] Invalid component_idx")
        );
    }

    #[test]
    fn an_unnamed_void_argument_before_the_last_is_refused() {
        let b = btf(vec![
            ty("int", int(32)),
            ty(
                "",
                BtfKind::FuncProto {
                    ret: 1,
                    params: vec![
                        crate::btf::Param {
                            name: String::new(),
                            ty: 0,
                        },
                        crate::btf::Param {
                            name: "b".into(),
                            ty: 1,
                        },
                    ],
                },
            ),
        ]);
        assert_eq!(resolve_refusal(&b).as_deref(), Some("[2] Invalid arg#1"));
    }
}
