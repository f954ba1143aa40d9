//! The glob against a table of Redis's answers and, as a property, against a
//! transliteration of Redis 7's recursive `stringmatchlen` (memoised, so the
//! reference itself stays cheap on the short inputs generated here).

use std::collections::HashMap;

use proptest::prelude::*;

use super::{is_match_all, matches, matches_nocase, matches_with};

#[test]
fn glob_cases_match_redis() {
    let cases: &[(&str, &str, bool)] = &[
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
        ("[", "a", false),
        ("[^", "a", true),
        ("[]", "a", false),
        ("[^]", "a", true),
        ("[a-]", "_", true),
        ("[a-]", "b", false),
        ("abc", "abcd", false),
        ("abc*", "abc", true),
        ("[\\]]", "]", true),
        ("\\", "\\", true),
        ("a\\", "a\\", true),
        // The empty string: only the empty pattern matches it (`*` alone is
        // special-cased by KEYS and SCAN before matching).
        ("", "", true),
        ("*", "", false),
        ("**", "", false),
        ("", "a", false),
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
        assert_eq!(reference(pat.as_bytes(), s.as_bytes(), false), want);
    }
    assert!(is_match_all(b"*") && !is_match_all(b"**"));
}

#[test]
fn nocase_folds_literals_and_ranges_but_not_escapes_in_classes() {
    let cases: &[(&str, &str, bool)] = &[
        ("MAX*", "maxmemory", true),
        ("h[A-C]llo", "hbllo", true),
        ("h[ABC]llo", "hbllo", true),
        ("h\\Ello", "hello", true),
        ("h[\\E]llo", "hello", false),
        // Redis orders a range's ends before folding: Z-a becomes z..a, empty.
        ("[Z-a]", "z", false),
    ];
    for &(pat, s, want) in cases {
        assert_eq!(
            matches_nocase(pat.as_bytes(), s.as_bytes()),
            want,
            "{pat:?} vs {s:?}"
        );
        assert_eq!(reference(pat.as_bytes(), s.as_bytes(), true), want);
    }
    assert!(!matches(b"MAX*", b"maxmemory"));
}

#[test]
fn many_stars_over_a_long_string_finish() {
    // Exponential for a naive backtracking matcher; one pass here.
    let pat = "*a".repeat(5_000) + "*b";
    let s = "a".repeat(20_000);
    assert!(!matches(pat.as_bytes(), s.as_bytes()));
    assert!(matches(&"*".repeat(10_000).into_bytes(), s.as_bytes()));
    let pat = "*?".repeat(3_000) + "*[";
    assert!(!matches(pat.as_bytes(), s.as_bytes()));
}

/// Redis 7.0's `stringmatchlen`, transliterated (recursion at `*`, without
/// its skip-longer-matches shortcut and nesting cap, which only prune).
fn reference(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut memo = HashMap::new();
    redis_match(pat, 0, s, 0, nocase, &mut memo)
}

fn lower(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn redis_match(
    pat: &[u8],
    p0: usize,
    s: &[u8],
    i0: usize,
    nocase: bool,
    memo: &mut HashMap<(usize, usize), bool>,
) -> bool {
    if let Some(&r) = memo.get(&(p0, i0)) {
        return r;
    }
    let (mut p, mut i) = (p0, i0);
    let r = 'out: {
        while p < pat.len() && i < s.len() {
            match pat[p] {
                b'*' => {
                    while p + 1 < pat.len() && pat[p + 1] == b'*' {
                        p += 1;
                    }
                    if p + 1 == pat.len() {
                        break 'out true;
                    }
                    while i < s.len() {
                        if redis_match(pat, p + 1, s, i, nocase, memo) {
                            break 'out true;
                        }
                        i += 1;
                    }
                    break 'out false;
                }
                b'?' => i += 1,
                b'[' => {
                    p += 1;
                    let not = pat.get(p) == Some(&b'^');
                    if not {
                        p += 1;
                    }
                    let mut m = false;
                    loop {
                        let rem = pat.len() - p;
                        // C reads the terminating NUL when nothing remains.
                        let c0 = pat.get(p).copied().unwrap_or(0);
                        if c0 == b'\\' && rem >= 2 {
                            p += 1;
                            m |= pat[p] == s[i];
                        } else if c0 == b']' {
                            break;
                        } else if rem == 0 {
                            p -= 1;
                            break;
                        } else if rem >= 3 && pat[p + 1] == b'-' {
                            let (mut a, mut b) = (pat[p], pat[p + 2]);
                            if a > b {
                                std::mem::swap(&mut a, &mut b);
                            }
                            let (a, b, c) =
                                (lower(a, nocase), lower(b, nocase), lower(s[i], nocase));
                            p += 2;
                            m |= c >= a && c <= b;
                        } else {
                            m |= lower(c0, nocase) == lower(s[i], nocase);
                        }
                        p += 1;
                    }
                    if m == not {
                        break 'out false;
                    }
                    i += 1;
                }
                c => {
                    let c = if c == b'\\' && pat.len() - p >= 2 {
                        p += 1;
                        pat[p]
                    } else {
                        c
                    };
                    if lower(c, nocase) != lower(s[i], nocase) {
                        break 'out false;
                    }
                    i += 1;
                }
            }
            p += 1;
            if i == s.len() {
                while p < pat.len() && pat[p] == b'*' {
                    p += 1;
                }
                break;
            }
        }
        p == pat.len() && i == s.len()
    };
    memo.insert((p0, i0), r);
    r
}

/// Patterns built from pieces that exercise every rule: single bytes of each
/// kind plus whole classes, ranges across cases, escapes and unclosed ends.
fn pattern_bytes() -> impl Strategy<Value = Vec<u8>> {
    const PIECES: &[&str] = &[
        "a", "b", "A", "*", "?", "[", "]", "^", "-", "\\", "[ab]", "[^a]", "[A-b]", "[b-A]",
        "[a-]", "[\\]]", "[\\A]", "\\*", "\\A", "[^", "**",
    ];
    proptest::collection::vec(proptest::sample::select(PIECES), 0..7)
        .prop_map(|ps| ps.concat().into_bytes())
}

fn string_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::sample::select(&b"abAB]-\\^*"[..]), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn glob_agrees_with_redis_stringmatchlen(pat in pattern_bytes(), s in string_bytes(), nocase in any::<bool>()) {
        prop_assert_eq!(matches_with(&pat, &s, nocase), reference(&pat, &s, nocase),
            "pattern {:?} string {:?} nocase {}", String::from_utf8_lossy(&pat), String::from_utf8_lossy(&s), nocase);
    }

    #[test]
    fn glob_never_panics_on_arbitrary_bytes(pat in proptest::collection::vec(any::<u8>(), 0..40),
                                            s in proptest::collection::vec(any::<u8>(), 0..40)) {
        let _ = matches(&pat, &s);
        let _ = matches_nocase(&pat, &s);
    }

    #[test]
    fn a_literal_pattern_matches_only_itself(s in proptest::collection::vec(proptest::sample::select(&b"abc:xyz09"[..]), 1..20),
                                             t in proptest::collection::vec(proptest::sample::select(&b"abc:xyz09"[..]), 1..20)) {
        prop_assert!(matches(&s, &s));
        prop_assert_eq!(matches(&s, &t), s == t);
    }
}
