//! The one check of a field that takes one of a few words: the value it
//! names, or an error that names the field and lists the words.

/// The value paired with `got` in `choices`, else
/// `field: expected "a", "b" or "c", got "x"`.
pub(super) fn one_of<T: Copy>(field: &str, got: &str, choices: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, v)) = choices.iter().find(|(word, _)| *word == got) {
        return Ok(*v);
    }
    let words: Vec<String> = choices.iter().map(|(w, _)| format!("\"{w}\"")).collect();
    let listed = match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words.concat(),
    };
    Err(format!("{field}: expected {listed}, got {got:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_lists_every_word() {
        let two = [("proxy", 1), ("sentinel", 2)];
        assert_eq!(one_of("f.mode", "sentinel", &two), Ok(2));
        assert_eq!(
            one_of("f.mode", "x", &two),
            Err("f.mode: expected \"proxy\" or \"sentinel\", got \"x\"".into())
        );
        let three = [("a", 1), ("b", 2), ("c", 3)];
        assert_eq!(
            one_of("f", "", &three),
            Err("f: expected \"a\", \"b\" or \"c\", got \"\"".into())
        );
    }
}
