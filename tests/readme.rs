//! The README stays true: its command table is the code's, and its first
//! screen gives the start and test commands.

#[test]
fn readme_command_table_equals_the_command_table() {
    let readme = readme();
    let start = readme.find("<!-- commands:begin").expect("begin marker");
    let start = start + readme[start..].find('\n').unwrap() + 1;
    let end = readme.find("<!-- commands:end -->").expect("end marker");
    assert_eq!(
        &readme[start..end],
        shardis::resp::command::markdown_table(),
        "regenerate with `cargo run -- commands` and paste between the markers"
    );
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

#[test]
fn readme_first_screen_has_the_start_and_test_commands() {
    let readme = readme();
    let first: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    assert!(first.contains("cargo run --release -- up"));
    assert!(first.contains("cargo test"));
}

#[test]
fn readme_names_every_package_ci_installs() {
    let readme = readme();
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
    let tests = &readme[readme.find("\n## Tests").expect("a Tests section")..];
    let mut packages = 0;
    for line in ci.lines() {
        let Some(list) = line.split("missing+=(").nth(1) else {
            continue;
        };
        for pkg in list.split(')').next().unwrap().split_whitespace() {
            assert!(
                tests.contains(&format!("`{pkg}`")),
                "README's Tests section names {pkg}"
            );
            packages += 1;
        }
    }
    assert!(packages >= 10, "found the package list in .ci/run");
    assert!(
        !ci.contains("pip install -q --disable-pip-version-check \"redis"),
        "no global pip install"
    );
    for line in ci.lines().filter(|l| l.contains("pip install")) {
        assert!(
            line.contains("--target \"target/"),
            "pip installs only under target/: {line}"
        );
    }
}
