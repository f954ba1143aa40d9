//! The README stays true: its command table is the code's, and its first
//! screen gives the start and test commands.

#[test]
fn readme_command_table_equals_the_command_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("<!-- commands:begin").expect("begin marker");
    let start = start + readme[start..].find('\n').unwrap() + 1;
    let end = readme.find("<!-- commands:end -->").expect("end marker");
    assert_eq!(
        &readme[start..end],
        shardis::resp::command::markdown_table(),
        "regenerate with `cargo run -- commands` and paste between the markers"
    );
}

#[test]
fn readme_first_screen_has_the_start_and_test_commands() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let first: String = readme.lines().take(30).collect::<Vec<_>>().join("\n");
    assert!(first.contains("cargo run --release -- up"));
    assert!(first.contains("cargo test"));
}
