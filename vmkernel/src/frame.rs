//! The guest's results on the serial console, framed so that the host can pick them out of
//! whatever else the console carries (boot messages, printk from the middle of a job, the
//! tty's `\r\n`).
//!
//! Every record is one line `@@bpfemu-vm FIELD... HASH`: fields are plain words or base64, so
//! no record holds a space, a newline or a byte the tty would rewrite, and `HASH` (FNV-1a of
//! the line before it) tells a clean line from one a kernel message landed in the middle of.
//! The last record, `done N`, counts the records before it, so a truncated run is told apart
//! from a finished one.

/// The prefix of every record line.
pub const MARKER: &str = "@@bpfemu-vm";

/// Payload bytes per record line: 768 bytes make 1024 base64 characters, well under any
/// console's line limits.
pub const CHUNK: usize = 768;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes what [`base64_encode`] wrote; `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for quad in bytes.chunks(4) {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            let v = ALPHABET.iter().position(|&a| a == c)?;
            n = (n << 6) | v as u32;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// FNV-1a, 32 bits: enough to notice a line that something else was written into.
pub fn line_hash(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// One record line (without its newline) from its fields.
pub fn encode_record(fields: &[&str]) -> String {
    let body = std::iter::once(MARKER)
        .chain(fields.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let hash = line_hash(&body);
    format!("{body} {hash:08x}")
}

/// A console line's record fields, when the line holds one.
pub enum Scanned {
    /// No record on this line.
    Other,
    /// A record whose hash matches: its fields, the marker and hash removed.
    Record(Vec<String>),
    /// A record line whose hash does not match what it holds.
    Corrupt,
}

/// Finds a record in one console line. The record may follow other text on the line (a
/// kernel message that had not ended when the record began) and the tty's `\r` may end it.
pub fn scan_line(line: &str) -> Scanned {
    let Some(at) = line.find(MARKER) else {
        return Scanned::Other;
    };
    let text = line[at..].trim_end_matches(['\r', '\n']);
    let Some((body, hash)) = text.rsplit_once(' ') else {
        return Scanned::Corrupt;
    };
    if u32::from_str_radix(hash, 16).ok() != Some(line_hash(body)) {
        return Scanned::Corrupt;
    }
    let fields = body.split(' ').skip(1).map(str::to_owned).collect();
    Scanned::Record(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length_and_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        for len in 0..all.len() {
            let text = base64_encode(&all[..len]);
            assert_eq!(base64_decode(&text).as_deref(), Some(&all[..len]), "{len}");
        }
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_decode("Zm9v!g=="), None);
        assert_eq!(base64_decode("Zm9"), None);
    }

    #[test]
    fn a_record_survives_a_prefix_and_a_carriage_return_but_not_a_change() {
        let line = encode_record(&["job-end", "3", "0"]);
        let noisy = format!("[    1.2] something{line}\r");
        let Scanned::Record(fields) = scan_line(&noisy) else {
            panic!("record not found in {noisy:?}");
        };
        assert_eq!(fields, ["job-end", "3", "0"]);
        let changed = line.replacen("job-end 3", "job-end 4", 1);
        assert!(matches!(scan_line(&changed), Scanned::Corrupt));
        assert!(matches!(scan_line("plain console text"), Scanned::Other));
    }
}
