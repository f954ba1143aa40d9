//! Memory sizes as CONFIG and `client-output-buffer-limit` write them.

/// Parses a Redis memory value (`memtoull`): digits with an optional
/// b/k/kb/m/mb/g/gb unit, any case; no sign; empty is 0, as in Redis.
pub(crate) fn parse_memory(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return Some(0);
    }
    let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}
