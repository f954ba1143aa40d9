//! The number of nodes of the radix tree Redis keeps a stream's nodes in
//! (XINFO STREAM's `radix-tree-nodes`), computed from the node keys (the
//! 16-byte big-endian IDs) as Redis's compressed rax lays them out: a
//! compressed node for each run shared by all keys below it, a branching
//! node where they part, and a leaf per key.

use super::StreamId;

/// Nodes of the rax holding `keys` (sorted, distinct).
pub(super) fn nodes(keys: &[StreamId]) -> usize {
    let keys: Vec<[u8; 16]> = keys
        .iter()
        .map(|id| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&id.ms.to_be_bytes());
            k[8..].copy_from_slice(&id.seq.to_be_bytes());
            k
        })
        .collect();
    if keys.is_empty() {
        return 1;
    }
    below(&keys, 0)
}

/// Nodes of the subtree whose node sits at byte `d` of `keys`.
fn below(keys: &[[u8; 16]], d: usize) -> usize {
    if keys.len() == 1 {
        return if d == 16 { 1 } else { 2 };
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    let mut c = d;
    while c < 16 && first[c] == last[c] {
        c += 1;
    }
    let compressed = usize::from(c > d);
    let mut n = compressed + 1;
    let mut at = 0;
    while at < keys.len() {
        let b = keys[at][c];
        let end = at + keys[at..].iter().take_while(|k| k[c] == b).count();
        n += below(&keys[at..end], c + 1);
        at = end;
    }
    n
}
