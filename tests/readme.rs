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
fn readme_first_ten_minutes_go_start_then_try_then_test_one_line_each() {
    let readme = readme();
    let section = readme
        .split("## First ten minutes\n")
        .nth(1)
        .expect("a First ten minutes section")
        .split("\n---\n")
        .next()
        .unwrap();
    let at = |what: &str| {
        section
            .find(what)
            .unwrap_or_else(|| panic!("{what:?} in First ten minutes"))
    };
    let steps = [at("**1. Start**"), at("**2. Try**"), at("**3. Test**")];
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "start, try, test");
    assert!(at("cargo run --release -- up") < at("redis-cli -p 7000"));
    assert!(at("redis-cli -p 7000") < at("\ncargo test\n"));
    for step in ["**1. Start**", "**2. Try**", "**3. Test**"] {
        // The step's prose: its one line, then the code block right after.
        let rest = &section[at(step)..];
        let (line, after) = rest.split_once('\n').unwrap();
        assert!(
            after.starts_with("\n```sh\n"),
            "{step}: one line of prose: {line}"
        );
    }
    assert!(section.lines().count() < 40, "a short section");
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
