//! The sizes of Redis's stream listpacks, element by element, so a node
//! fills up at the same entry as in Redis (`stream-node-max-bytes`).

use super::StreamId;

/// Bytes of a listpack element whose encoding and data take `n` bytes:
/// those plus the back-length.
fn with_backlen(n: usize) -> usize {
    n + match n {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes of an integer element.
pub(super) fn int_size(v: i64) -> usize {
    with_backlen(match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    })
}

/// Bytes of a string element (stored as an integer when it is one).
fn str_size(s: &[u8]) -> usize {
    if s.len() <= 20 {
        if let Some(v) = crate::resp::parse_i64(s) {
            return int_size(v);
        }
    }
    with_backlen(match s.len() {
        0..=63 => 1 + s.len(),
        64..=4095 => 2 + s.len(),
        _ => 5 + s.len(),
    })
}

/// A new node's bytes without its two counters: header, end byte, the
/// master field count, the master fields (the names of the flattened
/// pairs `fv`) and the terminating 0.
pub(super) fn master_bytes(fv: &[&[u8]]) -> usize {
    7 + int_size((fv.len() / 2) as i64)
        + fv.iter().step_by(2).map(|f| str_size(f)).sum::<usize>()
        + int_size(0)
}

/// The bytes one entry adds to a node; `same` when its field names are
/// the master's.
pub(super) fn entry_bytes(master: StreamId, same: bool, id: StreamId, fv: &[&[u8]]) -> usize {
    let n = fv.len() / 2;
    let ms = id.ms.wrapping_sub(master.ms) as i64;
    let seq = id.seq.wrapping_sub(master.seq) as i64;
    // flags (1 byte and its back-length), then the ID deltas.
    let mut b = 2 + int_size(ms) + int_size(seq);
    let lp_count = if same {
        b += fv
            .iter()
            .skip(1)
            .step_by(2)
            .map(|v| str_size(v))
            .sum::<usize>();
        n + 3
    } else {
        b += int_size(n as i64) + fv.iter().map(|f| str_size(f)).sum::<usize>();
        2 * n + 4
    };
    b + int_size(lp_count as i64)
}
