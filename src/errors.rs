//! Errors as the command line says them: one line, each cause once. The binary prints them
//! after `bpfemu: `; the Python module raises them with the same text.

/// An error and its causes on one line, each said once: a cause already in the text (an OS
/// error that a library's message quotes) is left out, and so is Rust's "(os error N)".
pub fn render_error(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = strip_os_error_code(&cause.to_string());
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += &part;
    }
    text
}

fn strip_os_error_code(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find(" (os error ") {
        let end = out[start..].find(')').map_or(out.len(), |e| start + e + 1);
        out.replace_range(start..end, "");
    }
    out
}
