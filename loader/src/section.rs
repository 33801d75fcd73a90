//! Program sections: what a section name says about the program in it (libbpf's
//! `section_defs` table and `sec_def_matches`), plus the pre-1.0 spellings libbpf used to
//! accept (`xdp_foo`, `socket1`, `classifier/x`), which we still map, with a warning.

use bpfemu_isa::uapi::*;

/// What libbpf derives from a section name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionKind {
    pub prog_type: u32,
    pub expected_attach_type: Option<u32>,
    /// `BPF_F_*` load flags (`BPF_F_SLEEPABLE`, `BPF_F_XDP_HAS_FRAGS`).
    pub prog_flags: u32,
}

/// How a section name was recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// libbpf 1.x accepts the name.
    Exact(SectionKind),
    /// Only pre-1.0 libbpf accepted it; the string explains the mapping.
    Legacy(SectionKind, String),
}

// libbpf's `enum sec_def_flags`; only the ones that change what we load matter here.
const SEC_NONE: u32 = 0;
const SEC_EXP_ATTACH_OPT: u32 = 1;
const SEC_ATTACHABLE: u32 = 2;
const SEC_ATTACHABLE_OPT: u32 = SEC_ATTACHABLE | SEC_EXP_ATTACH_OPT;
const SEC_ATTACH_BTF: u32 = 4;
const SEC_SLEEPABLE: u32 = 8;
const SEC_XDP_FRAGS: u32 = 16;
const SEC_USDT: u32 = 32;

struct SecDef {
    /// `name` exact, `name+` exact or `name/...`, `name/` only `name/...`.
    pattern: &'static str,
    prog_type: u32,
    attach: Option<u32>,
    flags: u32,
}

const fn def(pattern: &'static str, prog_type: u32, attach: Option<u32>, flags: u32) -> SecDef {
    SecDef {
        pattern,
        prog_type,
        attach,
        flags,
    }
}

/// libbpf 1.7's table, in its order (first match wins).
const SECTION_DEFS: &[SecDef] = &[
    def("socket", BPF_PROG_TYPE_SOCKET_FILTER, None, SEC_NONE),
    def(
        "sk_reuseport/migrate",
        BPF_PROG_TYPE_SK_REUSEPORT,
        Some(BPF_SK_REUSEPORT_SELECT_OR_MIGRATE),
        SEC_ATTACHABLE,
    ),
    def(
        "sk_reuseport",
        BPF_PROG_TYPE_SK_REUSEPORT,
        Some(BPF_SK_REUSEPORT_SELECT),
        SEC_ATTACHABLE,
    ),
    def("kprobe+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("uprobe+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("uprobe.s+", BPF_PROG_TYPE_KPROBE, None, SEC_SLEEPABLE),
    def("kretprobe+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("uretprobe+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("uretprobe.s+", BPF_PROG_TYPE_KPROBE, None, SEC_SLEEPABLE),
    def(
        "kprobe.multi+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_KPROBE_MULTI),
        SEC_NONE,
    ),
    def(
        "kretprobe.multi+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_KPROBE_MULTI),
        SEC_NONE,
    ),
    def(
        "kprobe.session+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_KPROBE_SESSION),
        SEC_NONE,
    ),
    def(
        "uprobe.multi+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_MULTI),
        SEC_NONE,
    ),
    def(
        "uretprobe.multi+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_MULTI),
        SEC_NONE,
    ),
    def(
        "uprobe.session+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_SESSION),
        SEC_NONE,
    ),
    def(
        "uprobe.multi.s+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_MULTI),
        SEC_SLEEPABLE,
    ),
    def(
        "uretprobe.multi.s+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_MULTI),
        SEC_SLEEPABLE,
    ),
    def(
        "uprobe.session.s+",
        BPF_PROG_TYPE_KPROBE,
        Some(BPF_TRACE_UPROBE_SESSION),
        SEC_SLEEPABLE,
    ),
    def("ksyscall+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("kretsyscall+", BPF_PROG_TYPE_KPROBE, None, SEC_NONE),
    def("usdt+", BPF_PROG_TYPE_KPROBE, None, SEC_USDT),
    def(
        "usdt.s+",
        BPF_PROG_TYPE_KPROBE,
        None,
        SEC_USDT | SEC_SLEEPABLE,
    ),
    def(
        "tc/ingress",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_TCX_INGRESS),
        SEC_NONE,
    ),
    def(
        "tc/egress",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_TCX_EGRESS),
        SEC_NONE,
    ),
    def(
        "tcx/ingress",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_TCX_INGRESS),
        SEC_NONE,
    ),
    def(
        "tcx/egress",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_TCX_EGRESS),
        SEC_NONE,
    ),
    def("tc", BPF_PROG_TYPE_SCHED_CLS, None, SEC_NONE),
    def("classifier", BPF_PROG_TYPE_SCHED_CLS, None, SEC_NONE),
    def("action", BPF_PROG_TYPE_SCHED_ACT, None, SEC_NONE),
    def(
        "netkit/primary",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_NETKIT_PRIMARY),
        SEC_NONE,
    ),
    def(
        "netkit/peer",
        BPF_PROG_TYPE_SCHED_CLS,
        Some(BPF_NETKIT_PEER),
        SEC_NONE,
    ),
    def("tracepoint+", BPF_PROG_TYPE_TRACEPOINT, None, SEC_NONE),
    def("tp+", BPF_PROG_TYPE_TRACEPOINT, None, SEC_NONE),
    def(
        "raw_tracepoint+",
        BPF_PROG_TYPE_RAW_TRACEPOINT,
        None,
        SEC_NONE,
    ),
    def("raw_tp+", BPF_PROG_TYPE_RAW_TRACEPOINT, None, SEC_NONE),
    def(
        "raw_tracepoint.w+",
        BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE,
        None,
        SEC_NONE,
    ),
    def(
        "raw_tp.w+",
        BPF_PROG_TYPE_RAW_TRACEPOINT_WRITABLE,
        None,
        SEC_NONE,
    ),
    def(
        "tp_btf+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_RAW_TP),
        SEC_ATTACH_BTF,
    ),
    def(
        "fentry+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FENTRY),
        SEC_ATTACH_BTF,
    ),
    def(
        "fmod_ret+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_MODIFY_RETURN),
        SEC_ATTACH_BTF,
    ),
    def(
        "fexit+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FEXIT),
        SEC_ATTACH_BTF,
    ),
    def(
        "fentry.s+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FENTRY),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def(
        "fmod_ret.s+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_MODIFY_RETURN),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def(
        "fexit.s+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FEXIT),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def(
        "fsession+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FSESSION),
        SEC_ATTACH_BTF,
    ),
    def(
        "fsession.s+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_FSESSION),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def("freplace+", BPF_PROG_TYPE_EXT, None, SEC_ATTACH_BTF),
    def("lsm+", BPF_PROG_TYPE_LSM, Some(BPF_LSM_MAC), SEC_ATTACH_BTF),
    def(
        "lsm.s+",
        BPF_PROG_TYPE_LSM,
        Some(BPF_LSM_MAC),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def(
        "lsm_cgroup+",
        BPF_PROG_TYPE_LSM,
        Some(BPF_LSM_CGROUP),
        SEC_ATTACH_BTF,
    ),
    def(
        "iter+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_ITER),
        SEC_ATTACH_BTF,
    ),
    def(
        "iter.s+",
        BPF_PROG_TYPE_TRACING,
        Some(BPF_TRACE_ITER),
        SEC_ATTACH_BTF | SEC_SLEEPABLE,
    ),
    def("syscall", BPF_PROG_TYPE_SYSCALL, None, SEC_SLEEPABLE),
    def(
        "xdp.frags/devmap",
        BPF_PROG_TYPE_XDP,
        Some(BPF_XDP_DEVMAP),
        SEC_XDP_FRAGS,
    ),
    def(
        "xdp/devmap",
        BPF_PROG_TYPE_XDP,
        Some(BPF_XDP_DEVMAP),
        SEC_ATTACHABLE,
    ),
    def(
        "xdp.frags/cpumap",
        BPF_PROG_TYPE_XDP,
        Some(BPF_XDP_CPUMAP),
        SEC_XDP_FRAGS,
    ),
    def(
        "xdp/cpumap",
        BPF_PROG_TYPE_XDP,
        Some(BPF_XDP_CPUMAP),
        SEC_ATTACHABLE,
    ),
    def("xdp.frags", BPF_PROG_TYPE_XDP, Some(BPF_XDP), SEC_XDP_FRAGS),
    def("xdp", BPF_PROG_TYPE_XDP, Some(BPF_XDP), SEC_ATTACHABLE_OPT),
    def("perf_event", BPF_PROG_TYPE_PERF_EVENT, None, SEC_NONE),
    def("lwt_in", BPF_PROG_TYPE_LWT_IN, None, SEC_NONE),
    def("lwt_out", BPF_PROG_TYPE_LWT_OUT, None, SEC_NONE),
    def("lwt_xmit", BPF_PROG_TYPE_LWT_XMIT, None, SEC_NONE),
    def("lwt_seg6local", BPF_PROG_TYPE_LWT_SEG6LOCAL, None, SEC_NONE),
    def(
        "sockops",
        BPF_PROG_TYPE_SOCK_OPS,
        Some(BPF_CGROUP_SOCK_OPS),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "sk_skb/stream_parser",
        BPF_PROG_TYPE_SK_SKB,
        Some(BPF_SK_SKB_STREAM_PARSER),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "sk_skb/stream_verdict",
        BPF_PROG_TYPE_SK_SKB,
        Some(BPF_SK_SKB_STREAM_VERDICT),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "sk_skb/verdict",
        BPF_PROG_TYPE_SK_SKB,
        Some(BPF_SK_SKB_VERDICT),
        SEC_ATTACHABLE_OPT,
    ),
    def("sk_skb", BPF_PROG_TYPE_SK_SKB, None, SEC_NONE),
    def(
        "sk_msg",
        BPF_PROG_TYPE_SK_MSG,
        Some(BPF_SK_MSG_VERDICT),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "lirc_mode2",
        BPF_PROG_TYPE_LIRC_MODE2,
        Some(BPF_LIRC_MODE2),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "flow_dissector",
        BPF_PROG_TYPE_FLOW_DISSECTOR,
        Some(BPF_FLOW_DISSECTOR),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "cgroup_skb/ingress",
        BPF_PROG_TYPE_CGROUP_SKB,
        Some(BPF_CGROUP_INET_INGRESS),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "cgroup_skb/egress",
        BPF_PROG_TYPE_CGROUP_SKB,
        Some(BPF_CGROUP_INET_EGRESS),
        SEC_ATTACHABLE_OPT,
    ),
    def("cgroup/skb", BPF_PROG_TYPE_CGROUP_SKB, None, SEC_NONE),
    def(
        "cgroup/sock_create",
        BPF_PROG_TYPE_CGROUP_SOCK,
        Some(BPF_CGROUP_INET_SOCK_CREATE),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sock_release",
        BPF_PROG_TYPE_CGROUP_SOCK,
        Some(BPF_CGROUP_INET_SOCK_RELEASE),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sock",
        BPF_PROG_TYPE_CGROUP_SOCK,
        Some(BPF_CGROUP_INET_SOCK_CREATE),
        SEC_ATTACHABLE_OPT,
    ),
    def(
        "cgroup/post_bind4",
        BPF_PROG_TYPE_CGROUP_SOCK,
        Some(BPF_CGROUP_INET4_POST_BIND),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/post_bind6",
        BPF_PROG_TYPE_CGROUP_SOCK,
        Some(BPF_CGROUP_INET6_POST_BIND),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/bind4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET4_BIND),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/bind6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET6_BIND),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/connect4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET4_CONNECT),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/connect6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET6_CONNECT),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/connect_unix",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UNIX_CONNECT),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sendmsg4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UDP4_SENDMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sendmsg6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UDP6_SENDMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sendmsg_unix",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UNIX_SENDMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/recvmsg4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UDP4_RECVMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/recvmsg6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UDP6_RECVMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/recvmsg_unix",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UNIX_RECVMSG),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getpeername4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET4_GETPEERNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getpeername6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET6_GETPEERNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getpeername_unix",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UNIX_GETPEERNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getsockname4",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET4_GETSOCKNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getsockname6",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_INET6_GETSOCKNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getsockname_unix",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        Some(BPF_CGROUP_UNIX_GETSOCKNAME),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/sysctl",
        BPF_PROG_TYPE_CGROUP_SYSCTL,
        Some(BPF_CGROUP_SYSCTL),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/getsockopt",
        BPF_PROG_TYPE_CGROUP_SOCKOPT,
        Some(BPF_CGROUP_GETSOCKOPT),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/setsockopt",
        BPF_PROG_TYPE_CGROUP_SOCKOPT,
        Some(BPF_CGROUP_SETSOCKOPT),
        SEC_ATTACHABLE,
    ),
    def(
        "cgroup/dev",
        BPF_PROG_TYPE_CGROUP_DEVICE,
        Some(BPF_CGROUP_DEVICE),
        SEC_ATTACHABLE_OPT,
    ),
    def("struct_ops+", BPF_PROG_TYPE_STRUCT_OPS, None, SEC_NONE),
    def(
        "struct_ops.s+",
        BPF_PROG_TYPE_STRUCT_OPS,
        None,
        SEC_SLEEPABLE,
    ),
    def(
        "sk_lookup",
        BPF_PROG_TYPE_SK_LOOKUP,
        Some(BPF_SK_LOOKUP),
        SEC_ATTACHABLE,
    ),
    def(
        "netfilter",
        BPF_PROG_TYPE_NETFILTER,
        Some(BPF_NETFILTER),
        SEC_NONE,
    ),
];

/// Section prefixes of libbpf 0.x that 1.x dropped, with the table entry they meant.
const LEGACY_PREFIXES: &[(&str, &str)] = &[
    ("xdp_devmap/", "xdp/devmap"),
    ("xdp_cpumap/", "xdp/cpumap"),
    ("xdp", "xdp"),
    ("socket", "socket"),
    ("classifier", "classifier"),
    ("action", "action"),
    ("kprobe", "kprobe+"),
    ("kretprobe", "kretprobe+"),
    ("tracepoint", "tracepoint+"),
    ("raw_tracepoint", "raw_tracepoint+"),
    ("perf_event", "perf_event"),
    ("sk_skb", "sk_skb"),
    ("sk_msg", "sk_msg"),
    ("sockops", "sockops"),
    ("lwt_in", "lwt_in"),
    ("lwt_out", "lwt_out"),
    ("lwt_xmit", "lwt_xmit"),
    ("flow_dissector", "flow_dissector"),
];

/// Classifies a program section name (a leading `?`, libbpf's "do not autoload", is ignored).
pub fn classify(section: &str) -> Option<Match> {
    let name = section.strip_prefix('?').unwrap_or(section);
    if let Some(d) = SECTION_DEFS.iter().find(|d| matches(d.pattern, name)) {
        return Some(Match::Exact(kind_of(d)));
    }
    classify_legacy(name)
}

fn classify_legacy(name: &str) -> Option<Match> {
    let (prefix, pattern) = LEGACY_PREFIXES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))?;
    let d = SECTION_DEFS.iter().find(|d| d.pattern == *pattern)?;
    let shown = pattern.trim_end_matches('+');
    let why = format!(
        "section '{name}': pre-1.0 libbpf name (prefix '{prefix}'), loaded as SEC(\"{shown}\"); \
         libbpf 1.x rejects it"
    );
    Some(Match::Legacy(kind_of(d), why))
}

/// libbpf's `sec_def_matches`.
fn matches(pattern: &str, name: &str) -> bool {
    if pattern.ends_with('/') {
        return name.starts_with(pattern);
    }
    if let Some(base) = pattern.strip_suffix('+') {
        return match name.strip_prefix(base) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        };
    }
    pattern == name
}

/// The load-time consequences of the flags (libbpf's `libbpf_prepare_prog_load`): sleepable
/// programs get `BPF_F_SLEEPABLE`, `.frags` XDP programs `BPF_F_XDP_HAS_FRAGS`, and USDT
/// probes the uprobe-multi attach type on kernels that have it (6.18 does).
fn kind_of(d: &SecDef) -> SectionKind {
    let mut prog_flags = 0;
    if d.flags & SEC_SLEEPABLE != 0 {
        prog_flags |= BPF_F_SLEEPABLE;
    }
    if d.prog_type == BPF_PROG_TYPE_XDP && d.flags & SEC_XDP_FRAGS != 0 {
        prog_flags |= BPF_F_XDP_HAS_FRAGS;
    }
    let mut attach = d.attach;
    if d.flags & SEC_USDT != 0 {
        attach = Some(BPF_TRACE_UPROBE_MULTI);
    }
    // Entries whose attach type is the enum's 0 are spelled out in the table.
    if d.pattern == "cgroup_skb/ingress" {
        attach = Some(BPF_CGROUP_INET_INGRESS);
    }
    SectionKind {
        prog_type: d.prog_type,
        expected_attach_type: attach,
        prog_flags,
    }
}

/// Whether the attach target comes from BTF (`fentry/func`): such programs need a target the
/// loader does not resolve.
pub fn needs_btf_attach_target(section: &str) -> bool {
    let name = section.strip_prefix('?').unwrap_or(section);
    SECTION_DEFS
        .iter()
        .find(|d| matches(d.pattern, name))
        .is_some_and(|d| d.flags & SEC_ATTACH_BTF != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(name: &str) -> SectionKind {
        match classify(name) {
            Some(Match::Exact(k)) => k,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn xdp_family() {
        assert_eq!(exact("xdp").expected_attach_type, Some(BPF_XDP));
        assert_eq!(exact("xdp.frags").prog_flags, BPF_F_XDP_HAS_FRAGS);
        assert_eq!(
            exact("xdp/devmap").expected_attach_type,
            Some(BPF_XDP_DEVMAP)
        );
        let frags_cpumap = exact("xdp.frags/cpumap");
        assert_eq!(frags_cpumap.expected_attach_type, Some(BPF_XDP_CPUMAP));
        assert_eq!(frags_cpumap.prog_flags, BPF_F_XDP_HAS_FRAGS);
        assert_eq!(exact("?xdp").prog_type, BPF_PROG_TYPE_XDP);
    }

    #[test]
    fn plus_and_slash_rules() {
        assert_eq!(exact("kprobe/do_sys_open").prog_type, BPF_PROG_TYPE_KPROBE);
        assert_eq!(exact("kprobe").prog_type, BPF_PROG_TYPE_KPROBE);
        assert_eq!(
            exact("tcx/ingress").expected_attach_type,
            Some(BPF_TCX_INGRESS)
        );
        assert_eq!(exact("tc").prog_type, BPF_PROG_TYPE_SCHED_CLS);
        assert_eq!(exact("fentry.s/x").prog_flags, BPF_F_SLEEPABLE);
        assert!(classify("unknown_thing").is_none());
    }

    #[test]
    fn legacy_names_map_with_a_reason() {
        for (name, ty) in [
            ("xdp_foo", BPF_PROG_TYPE_XDP),
            ("socket1", BPF_PROG_TYPE_SOCKET_FILTER),
            ("classifier/x", BPF_PROG_TYPE_SCHED_CLS),
            ("kprobe_sys", BPF_PROG_TYPE_KPROBE),
        ] {
            match classify(name) {
                Some(Match::Legacy(k, why)) => {
                    assert_eq!(k.prog_type, ty);
                    assert!(why.contains(name));
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        match classify("xdp_devmap/x") {
            Some(Match::Legacy(k, _)) => assert_eq!(k.expected_attach_type, Some(BPF_XDP_DEVMAP)),
            other => panic!("{other:?}"),
        }
    }
}
