//! Map keys and values as JSON, typed by BTF, in the shape `bpftool -j map dump` prints them, so
//! a `--dump-maps` file reads like what a user gets from bpftool and a `--maps` file can be
//! written by hand or by a script.
//!
//! The typed form follows bpftool 7.1's `btf_dumper.c` in JSON mode (checked against the real
//! bpftool by the fixtures in `loader/tests/data/json`, see `gen.sh` there):
//! - ints of 8/16/32/64 bits: JSON numbers, signed or unsigned by the BTF encoding (clang's
//!   `char` is a signed int, so it prints as a number); `_Bool`: `true`/`false`; ints with the
//!   CHAR encoding: a one-character string (`"A"`, `"\u0001"`);
//! - bitfields, ints whose width is not 8/16/32/64, and 128-bit ints: hex strings (`"0x1f"`),
//!   the raw bits without sign extension;
//! - enums: the enumerator's name when the value (read sign-extended from the enum's size) equals
//!   one, else the signed number (bpftool compares 32-bit enumerators as signed, so an unsigned
//!   `enum : u8 { X = 200 }` holding 200 prints `-56`; we match that);
//! - pointers: the address as an unsigned number;
//! - arrays: lists, except `char` arrays that hold a printable NUL-terminated string, which print
//!   as that string (bytes after the NUL are not shown);
//! - structs and unions: objects by member name; an anonymous member prints under the key `""`;
//! - typedef/const/volatile/restrict/type_tag: transparent;
//! - a DATASEC (global data maps): `{".bss": [{"var": value}, ...]}`.
//!
//! Where bpftool's output is not valid or not lossless JSON we differ, on purpose: a char or
//! string holding `"` or `\` is escaped properly (bpftool 7.1 prints `\` as `\n`, and a lone
//! `"` char unescaped); floats print as numbers (bpftool refuses them with
//! `(unsupported-kind`), or as a hex string of their bits when a number would not read back
//! exactly; several anonymous members, which bpftool prints as duplicate `""` keys that a JSON
//! reader collapses to the last, are merged into one `""` object (C makes their field names
//! unique, so nothing is lost).
//!
//! Reading ([`value_from_json`]) accepts all of that back plus what a person writes: omitted
//! struct/union fields and section variables are zero, numbers may be JSON numbers or `"0x.."`
//! / decimal strings, a `char` array may be given as a string. Bytes the JSON cannot show come
//! back as zero: struct padding and bits no bitfield covers, bytes after a string's NUL; a
//! `_Bool` byte other than 0/1 comes back as 1.

mod contents;
mod decode;
mod encode;
mod error;

pub use contents::{
    MapContents, MapEntry, MapValue, dump_map_contents, entry_to_json, is_per_cpu,
    parse_map_contents,
};
pub use decode::{parse_hex, value_from_json};
pub use encode::value_to_json;
pub use error::{JsonError, Problem};
