//! Kinds of verifier errors: the rule ids SARIF viewers group results by, and the `type` of
//! a JUnit failure. A kind is recognised from the kernel's message, the one thing every
//! rejection has (the first kind whose pattern the message holds).

/// One kind of rejection.
#[derive(Debug)]
pub struct Kind {
    /// The rule id (`packet-bounds`).
    pub id: &'static str,
    /// A short name, as SARIF's `rule.name`.
    pub name: &'static str,
    /// One sentence a reader of a code-scanning alert sees.
    pub help: &'static str,
    patterns: &'static [&'static str],
}

/// Every kind, most specific first; [`OTHER`] catches the rest.
pub const KINDS: &[Kind] = &[
    Kind {
        id: "undecided",
        name: "NotCheckedYet",
        help: "The program uses something bpfemu's verifier does not check yet; the kernel may \
               accept or reject it.",
        patterns: &["not yet supported"],
    },
    Kind {
        id: "map-create",
        name: "MapCreation",
        help: "The kernel refuses to create a map of the object (BPF_MAP_CREATE), so no program \
               of it loads.",
        patterns: &["failed to create"],
    },
    Kind {
        id: "license",
        name: "GplOnly",
        help: "A GPL-only helper or kfunc called from a program whose license is not \
               GPL-compatible.",
        patterns: &["GPL-restricted", "GPL compatible"],
    },
    Kind {
        id: "too-large",
        name: "TooComplex",
        help: "The verifier's walk passed its limit (1,000,000 instructions processed, or too \
               many states or jumps): bound the loop, or split the program.",
        patterns: &[
            "program is too large",
            "is too complex",
            "too many states",
            "jumps is too complex",
        ],
    },
    Kind {
        id: "loop",
        name: "UnboundedLoop",
        help: "A loop the verifier cannot prove ends, or a back-edge it does not allow.",
        patterns: &["infinite loop", "back-edge", "loop"],
    },
    Kind {
        id: "packet-bounds",
        name: "PacketOutOfBounds",
        help: "A packet access the verifier cannot prove lies before data_end: compare the \
               pointer plus the access size with data_end first.",
        patterns: &["invalid access to packet", "outside of the packet"],
    },
    Kind {
        id: "null-check",
        name: "MissingNullCheck",
        help: "A pointer that may be NULL (a map lookup's result) is used before a NULL check.",
        patterns: &["_or_null", "or_null"],
    },
    Kind {
        id: "uninit-stack",
        name: "UninitializedStack",
        help: "A read of stack memory the program never wrote.",
        patterns: &[
            "invalid read from stack",
            "invalid indirect read from stack",
            "invalid indirect access to stack",
        ],
    },
    Kind {
        id: "uninit-register",
        name: "UninitializedRegister",
        help: "A register read before anything was written to it.",
        patterns: &["!read_ok"],
    },
    Kind {
        id: "unbounded-scalar",
        name: "UnboundedOffset",
        help: "An offset or size whose range the verifier cannot bound: clamp it (a comparison \
               or a mask) before the access.",
        patterns: &[
            "unbounded memory access",
            "min value is negative",
            "max value is outside",
            "value is outside of the allowed memory range",
            "unbounded",
        ],
    },
    Kind {
        id: "memory-bounds",
        name: "OutOfBounds",
        help: "An access outside the memory a pointer may reach (a map value, the context, \
               the stack).",
        patterns: &[
            "invalid access to map value",
            "invalid bpf_context access",
            "invalid access to memory",
            "invalid write to stack",
            "invalid stack",
            "out of bounds",
            "invalid mem access",
        ],
    },
    Kind {
        id: "pointer-arithmetic",
        name: "PointerArithmetic",
        help: "Arithmetic on a pointer that the verifier forbids.",
        patterns: &["pointer arithmetic", "pointer arith", "math between"],
    },
    Kind {
        id: "reference-leak",
        name: "ReferenceLeak",
        help: "A reference acquired (a socket, a ring buffer record, a lock) and not released \
               on every path.",
        patterns: &[
            "Unreleased reference",
            "reference has not been acquired",
            "reference leak",
            "unreleased",
        ],
    },
    Kind {
        id: "helper-call",
        name: "HelperCall",
        help: "A helper or kfunc the program type may not call, or an argument of the wrong \
               type.",
        patterns: &[
            "unknown func",
            "invalid func",
            "program of this type cannot use helper",
            "expected=",
            "kfunc",
            "Caller passes invalid args",
        ],
    },
    Kind {
        id: "return-value",
        name: "ReturnValue",
        help: "The program returns a value its type does not allow.",
        patterns: &["At program exit", "At callback return"],
    },
    Kind {
        id: "invalid-instruction",
        name: "InvalidInstruction",
        help: "An instruction the kernel does not accept (an unknown opcode, reserved fields \
               set, a jump out of range).",
        patterns: &[
            "unknown opcode",
            "reserved fields",
            "invalid BPF_",
            "jump out of range",
            "invalid insn",
            "unreachable insn",
        ],
    },
];

/// What no other kind matches.
pub const OTHER: Kind = Kind {
    id: "verifier",
    name: "VerifierRejection",
    help: "The kernel's verifier rejects the program.",
    patterns: &[],
};

/// The kind of a rejection with `message`.
pub fn classify(message: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.patterns.iter().any(|p| message.contains(p)))
        .unwrap_or(&OTHER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_messages_find_their_kinds() {
        let cases = [
            ("R1 offset is outside of the packet", "packet-bounds"),
            ("R0 invalid mem access 'map_value_or_null'", "null-check"),
            ("invalid read from stack R2 off -8+0 size 8", "uninit-stack"),
            ("R2 !read_ok", "uninit-register"),
            (
                "R1 unbounded memory access, make sure to bounds check any such access",
                "unbounded-scalar",
            ),
            (
                "BPF program is too large. Processed 1000001 insn",
                "too-large",
            ),
            ("map 'm': failed to create: -EINVAL", "map-create"),
            ("Unreleased reference id=2 alloc_insn=3", "reference-leak"),
            ("something new", "verifier"),
        ];
        for (message, id) in cases {
            assert_eq!(classify(message).id, id, "{message}");
        }
    }

    #[test]
    fn ids_are_unique() {
        let mut ids: Vec<&str> = KINDS.iter().map(|k| k.id).chain([OTHER.id]).collect();
        ids.sort_unstable();
        let len = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), len);
    }
}
