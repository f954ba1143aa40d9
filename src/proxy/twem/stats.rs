//! twemproxy's stats: the description `--describe-stats` prints.

use super::stats_table::{POOL, SERVER};

/// What `nutcracker --describe-stats` prints after its banner.
pub fn describe() -> String {
    let mut out = String::from("pool stats:\n");
    for (name, what) in POOL {
        out += &format!("  {name:<20}\"{what}\"\n");
    }
    out += "\nserver stats:\n";
    for (name, what) in SERVER {
        out += &format!("  {name:<20}\"{what}\"\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_description_is_laid_out_as_nutcracker_prints_it() {
        let d = super::describe();
        assert!(
            d.starts_with("pool stats:\n  client_eof          \"# eof on client connections\"\n")
        );
        assert!(d.contains(
            "\n\nserver stats:\n  server_eof          \"# eof on server connections\"\n"
        ));
        assert!(d.ends_with("  out_queue_bytes     \"current request bytes in outgoing queue\"\n"));
    }
}
