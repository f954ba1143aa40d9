//! Redis glob patterns, as `KEYS`, `SCAN MATCH` and `CONFIG GET` read them:
//! `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`, optionally case-insensitive —
//! the semantics of Redis's `stringmatchlen`, edge cases included (an
//! unclosed `[` runs to the end of the pattern; `[z-a]` is `[a-z]`; a range
//! like `[a-]` reaches `]`; a non-empty pattern never matches the empty string).
//!
//! One matcher for the proxy (CONFIG GET) and the built-in node (KEYS, SCAN,
//! CONFIG GET), so it lives at the top of the crate, beside `resp` and `ring`,
//! and depends on nothing: a glob is neither framing nor node storage.
//!
//! It must never backtrack more than one level: a pattern is client input and
//! runs on a runtime thread, and Redis's own recursive matcher (or a naive
//! one) takes exponential time on `*a*a*a…b`. Here the work is at most
//! `pattern length × string length` steps, and linear for the patterns people
//! write (one pass over the string per `*` segment that matches).
//!
//! One deliberate difference: Redis gives up (no match) once a pattern nests
//! more than 1 000 `*` groups, its guard against its own recursion; this
//! matcher needs no such cap, so `*a` repeated 1 500 times matches 1 500 `a`s.

/// Whether `s` matches the glob `pat`, case-sensitively (KEYS, SCAN MATCH).
pub(crate) fn matches(pat: &[u8], s: &[u8]) -> bool {
    matches_with(pat, s, false)
}

/// Whether `s` matches the glob `pat`, ignoring ASCII case (CONFIG GET).
pub(crate) fn matches_nocase(pat: &[u8], s: &[u8]) -> bool {
    matches_with(pat, s, true)
}

/// Whether the pattern is `*` alone: Redis then skips matching entirely, so
/// it also matches the empty key (which `**` does not).
pub(crate) fn is_match_all(pat: &[u8]) -> bool {
    pat == b"*"
}

/// The matcher. Greedy, with one resume point: the last `*` seen and how much
/// of the string it has swallowed. Every element other than `*` matches
/// exactly one byte, so when the text after the last `*` fails, letting that
/// `*` swallow one more byte is the only alternative worth trying — an
/// earlier `*` taking more could only push the tail further right, which the
/// last `*` already covers.
fn matches_with(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    // Redis's loop never starts on an empty string: only "" matches "".
    if s.is_empty() {
        return pat.is_empty();
    }
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() && pat[p] == b'*' {
            p += 1;
            star = Some((p, i));
            continue;
        }
        if i == s.len() {
            return pat[p..].iter().all(|&c| c == b'*');
        }
        if p < pat.len() {
            if let Some(next) = step(pat, p, s[i], nocase) {
                p = next;
                i += 1;
                continue;
            }
        }
        match star {
            // i < s.len() here and si <= i, so the star can take one more byte.
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
}

fn fold(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

/// Matches the one-byte element at `p` (not `*`) against `c`; the index
/// after the element when it matches.
fn step(pat: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let len = pat.len();
    match pat[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let mut p = p + 1;
            let not = p < len && pat[p] == b'^';
            if not {
                p += 1;
            }
            let mut matched = false;
            loop {
                if p < len && pat[p] == b'\\' && len - p >= 2 {
                    // An escaped byte inside a class compares exactly, even
                    // without case (as in Redis).
                    p += 1;
                    matched |= pat[p] == c;
                } else if p < len && pat[p] == b']' {
                    break;
                } else if p >= len {
                    // Unclosed class: it ends with the pattern.
                    p -= 1;
                    break;
                } else if len - p >= 3 && pat[p + 1] == b'-' {
                    // Redis orders the ends first, then folds case.
                    let (a, b) = (pat[p].min(pat[p + 2]), pat[p].max(pat[p + 2]));
                    let (a, b, x) = (fold(a, nocase), fold(b, nocase), fold(c, nocase));
                    matched |= a <= x && x <= b;
                    p += 2;
                } else {
                    matched |= fold(pat[p], nocase) == fold(c, nocase);
                }
                p += 1;
            }
            (matched != not).then_some(p + 1)
        }
        b'\\' if len - p >= 2 => (fold(pat[p + 1], nocase) == fold(c, nocase)).then_some(p + 2),
        x => (fold(x, nocase) == fold(c, nocase)).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests;
