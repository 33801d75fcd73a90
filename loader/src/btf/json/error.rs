//! Errors that say where in the document (map, JSON path) and what is wrong.

use std::fmt;

/// A JSON path like `.rules[3].value.dport`; empty means the whole value.
pub type JsonPath = String;

/// What went wrong, with where: the map (when known) and the JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    pub map: Option<String>,
    pub path: JsonPath,
    pub problem: Problem,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unknown field `{field}` in {ty}")]
    UnknownField { field: String, ty: String },
    #[error("unknown variable `{var}` in section {section}")]
    UnknownVariable { var: String, section: String },
    #[error("unknown enumerator `{name}` of {ty}")]
    UnknownEnumerator { name: String, ty: String },
    #[error("value {value} does not fit {ty}")]
    DoesNotFit { value: String, ty: String },
    #[error("expected an array of {expected} elements, got {got}")]
    ArrayLength { expected: u32, got: usize },
    #[error("a string of {len} bytes does not fit {ty}")]
    StringTooLong { len: usize, ty: String },
    #[error("expected {expected}, got {got}")]
    Expected { expected: String, got: String },
    #[error("bad hex {text:?}: {why}")]
    BadHex { text: String, why: String },
    #[error("{what} is {got} bytes, {what}_size is {expected}")]
    Size {
        what: &'static str,
        expected: u32,
        got: usize,
    },
    #[error("no map named `{name}` (maps: {known})")]
    UnknownMap { name: String, known: String },
    #[error("{0} cannot be shown as JSON")]
    Unsupported(String),
    #[error("bad BTF: {0}")]
    BadBtf(String),
    #[error("the bytes end at byte {len}, {ty} needs bits {start}..{end}")]
    Truncated {
        ty: String,
        len: usize,
        start: u64,
        end: u64,
    },
    #[error(
        "\"formatted\" {what} {formatted} does not match the hex bytes (which show as {hex}); edit one and delete the other"
    )]
    FormattedMismatch {
        what: &'static str,
        formatted: String,
        hex: String,
    },
    #[error("{0}")]
    Shape(String),
}

impl JsonError {
    pub(crate) fn at(path: &str, problem: Problem) -> Self {
        JsonError {
            map: None,
            path: path.to_string(),
            problem,
        }
    }

    /// Names the map, unless a deeper level already did.
    pub(crate) fn in_map(mut self, map: &str) -> Self {
        self.map.get_or_insert_with(|| map.to_string());
        self
    }

    /// Puts `prefix` in front of the path (an inner value's path becomes the document's).
    pub(crate) fn under(mut self, prefix: &str) -> Self {
        self.path.insert_str(0, prefix);
        self
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(map) = &self.map {
            write!(f, "map `{map}`: ")?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "at {}: {}", self.path, self.problem)
        }
    }
}

impl std::error::Error for JsonError {}

/// A short rendering of a JSON value for messages (long values are cut).
pub(crate) fn short(v: &serde_json::Value) -> String {
    let kind = match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    };
    let text = v.to_string();
    if text.len() > 40 {
        let cut: String = text.chars().take(37).collect();
        format!("{kind} ({cut}...)")
    } else {
        format!("{kind} ({text})")
    }
}

/// `.name` for identifier-like names, `["name"]` for others (`.bss`, `globals.bss`).
pub(crate) fn field_path(path: &str, name: &str) -> String {
    let ident = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ident {
        format!("{path}.{name}")
    } else {
        format!("{path}[{name:?}]")
    }
}
