//! The knobs are described in three places besides their table
//! (`src/knobs.rs`): the user guide's "Knobs" table, metaroce(7)'s KNOBS
//! section and the driver's declarations of their module parameters and
//! files (`rust/sys/knobs.c`, whose descriptions `modinfo` shows). Each
//! must name every knob, and only those, with the table's default and
//! range.

use std::path::{Path, PathBuf};

use metaroce_engine::knobs::Knob;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text from the line starting with `from` to the next line starting
/// with `to`.
fn section<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text
        .find(&format!("\n{from}"))
        .unwrap_or_else(|| panic!("no section {from:?}"));
    let end = text[start + 1..]
        .find(&format!("\n{to}"))
        .map_or(text.len(), |i| start + 1 + i);
    &text[start..end]
}

#[test]
fn user_guide_table_lists_every_knob_with_its_default_and_range() {
    let guide = read("Documentation/user-guide.md");
    let knobs = section(&guide, "## 8. Knobs", "## ");
    let rows: Vec<Vec<&str>> = knobs
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    let names: Vec<String> = Knob::ALL
        .iter()
        .map(|k| format!("`{}`", k.name()))
        .collect();
    let listed: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(listed, names, "the user guide's knobs, in order");
    for (k, row) in Knob::ALL.iter().zip(&rows) {
        let (min, max) = k.range();
        assert_eq!(
            row[3],
            k.default_value().to_string(),
            "{}: default",
            k.name()
        );
        assert_eq!(row[4], format!("{min} to {max}"), "{}: range", k.name());
    }
}

#[test]
fn man_page_lists_every_knob_with_its_default_and_range() {
    let man = read("Documentation/metaroce.7");
    let knobs = section(&man, ".SH KNOBS", ".SH ");
    let lines: Vec<&str> = knobs.lines().collect();
    let entries: Vec<(&str, &str)> = lines
        .windows(3)
        .filter(|w| w[0] == ".TP" && w[1].starts_with(".B "))
        .map(|w| (&w[1][3..], w[2]))
        .collect();
    let listed: Vec<&str> = entries.iter().map(|e| e.0).collect();
    let names: Vec<&str> = Knob::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(listed, names, "metaroce(7)'s knobs, in order");
    for (k, (_, line)) in Knob::ALL.iter().zip(&entries) {
        let (min, max) = k.range();
        let want = format!("; default {}; {min} to {max}.", k.default_value());
        assert!(
            line.ends_with(&want),
            "{}: {line:?} lacks {want:?}",
            k.name()
        );
    }
}

#[test]
fn driver_declares_a_parameter_and_a_file_for_every_knob() {
    let c = read("rust/sys/knobs.c");
    let decls: Vec<&str> = c
        .lines()
        .filter_map(|l| l.strip_prefix("METAROCE_KNOB("))
        .collect();
    let listed: Vec<&str> = decls.iter().map(|d| d.split(',').next().unwrap()).collect();
    let names: Vec<&str> = Knob::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(listed, names, "knobs.c's METAROCE_KNOB lines, in order");
    for (k, decl) in Knob::ALL.iter().zip(&decls) {
        let (min, max) = k.range();
        let want = format!("(default {}, {min}-{max})\");", k.default_value());
        assert!(
            decl.ends_with(&want),
            "{}: {decl:?} lacks {want:?}",
            k.name()
        );
        let attr = format!("\t&metaroce_knob_{}.attr,", k.name());
        assert!(
            c.lines().any(|l| l == attr),
            "knobs.c's group lacks {attr:?}"
        );
    }
}
