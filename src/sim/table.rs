//! Plain-text rendering for simulation reports: aligned tables and human
//! number formats (SI counts, bytes, durations, percentages).
//!
//! Used by every report in `sim`; knows nothing about what is measured.

use std::io::Write;

/// A table with a header row; the first column is left-aligned, the rest
/// right-aligned (they hold numbers).
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub(crate) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells print empty).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the table indented by two spaces.
    pub(crate) fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let cols = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (c, cell) in row.iter().enumerate().take(cols) {
                width[c] = width[c].max(cell.chars().count());
            }
        }
        let line = |cells: &[String], out: &mut dyn Write| -> std::io::Result<()> {
            let mut s = String::from(" ");
            for (c, w) in width.iter().enumerate() {
                let cell = cells.get(c).map_or("", |s| s.as_str());
                let pad = w - cell.chars().count();
                // Two spaces before every column: the indent, then the gap.
                s.push(' ');
                if c == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push(' ');
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            writeln!(out, "{}", s.trim_end())
        };
        line(&self.header, out)?;
        let rule: Vec<String> = width.iter().map(|&w| "-".repeat(w)).collect();
        line(&rule, out)?;
        for row in &self.rows {
            line(row, out)?;
        }
        Ok(())
    }
}

/// `1234567` → `1.23M`; plain below 1000.
pub(crate) fn si(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    scaled(v, [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")], "")
}

/// Decimal bytes: `102400000000` → `102.40 GB`.
pub(crate) fn bytes(v: f64) -> String {
    scaled(
        v,
        [(1e12, " TB"), (1e9, " GB"), (1e6, " MB"), (1e3, " KB")],
        " B",
    )
}

/// `v` over the first of `units` (largest first) it reaches, two decimals
/// and the unit; below them all, whole and `plain`.
fn scaled(v: f64, units: [(f64, &str); 4], plain: &str) -> String {
    for (scale, unit) in units {
        if v.abs() >= scale {
            return format!("{:.2}{unit}", v / scale);
        }
    }
    format!("{v:.0}{plain}")
}

/// Seconds as `2m55s`, `1h02m`, `4.2s`; `-` when unknown.
pub(crate) fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    if secs < 60.0 {
        return format!("{secs:.1}s");
    }
    let s = secs.round() as u64;
    if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// A fraction as a percentage with three decimals.
pub(crate) fn pct(frac: f64) -> String {
    format!("{:.3}%", frac * 100.0)
}

/// Counts with thousands separators: `1000000` → `1,000,000`.
pub(crate) fn count(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_format_for_humans() {
        let cases: &[(String, &str)] = &[
            (si(1_234_567.0), "1.23M"),
            (si(999.0), "999"),
            (bytes(102_400_000_000.0), "102.40 GB"),
            (bytes(12.0), "12 B"),
            (duration(4.25), "4.2s"),
            (duration(175.0), "2m55s"),
            (duration(3720.0), "1h02m"),
            (duration(f64::NAN), "-"),
            (pct(0.0909), "9.090%"),
            (count(1_000_000), "1,000,000"),
            (count(999), "999"),
            (count(0), "0"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(&["node", "keys"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long-name".into(), "12345".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want =
            "  node        keys\n  ---------  -----\n  a              1\n  long-name  12345\n";
        assert_eq!(text, want);
    }
}
