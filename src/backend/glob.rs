//! Redis glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`,
//! `[abc]`, `[^a]`, `[a-z]` and `\x`, with the same edge cases as Redis's
//! `stringmatchlen` (an unclosed `[` runs to the end of the pattern).
//!
//! Iterative with one backtrack point, so a pattern of many stars cannot
//! make a match exponential.

/// Whether `s` matches the glob `pat` (case-sensitive).
pub fn matches(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    // Where to resume after the last `*`: pattern index after it, and the
    // string index it has consumed up to.
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
            if let Some(next) = step(pat, p, s[i]) {
                p = next;
                i += 1;
                continue;
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
}

/// Matches one pattern element at `p` against `c`; the index after the
/// element when it matches.
fn step(pat: &[u8], p: usize, c: u8) -> Option<usize> {
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
                    p += 1;
                    matched |= pat[p] == c;
                } else if p < len && pat[p] == b']' {
                    break;
                } else if p >= len {
                    // Unclosed class: it ends with the pattern, as in Redis.
                    p -= 1;
                    break;
                } else if len - p >= 3 && pat[p + 1] == b'-' {
                    let (a, b) = (pat[p].min(pat[p + 2]), pat[p].max(pat[p + 2]));
                    matched |= (a..=b).contains(&c);
                    p += 2;
                } else {
                    matched |= pat[p] == c;
                }
                p += 1;
            }
            (matched != not).then_some(p + 1)
        }
        b'\\' if len - p >= 2 => (pat[p + 1] == c).then_some(p + 2),
        x => (x == c).then_some(p + 1),
    }
}

/// Whether the pattern is `*` alone (everything matches; skip matching).
pub fn is_match_all(pat: &[u8]) -> bool {
    pat == b"*"
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn glob_cases_match_redis() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h*llo", "hllo", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:age", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("**a", "bba", true),
            ("[abc", "a", true),
            ("[abc", "d", false),
            ("abc", "abcd", false),
            ("abc*", "abc", true),
            ("[\\]]", "]", true),
            (
                "*a*a*a*a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ];
        for &(pat, s, want) in cases {
            assert_eq!(
                matches(pat.as_bytes(), s.as_bytes()),
                want,
                "{pat:?} vs {s:?}"
            );
        }
    }
}
