//! Reading the docs: files by their path in the repository, the generated sections between
//! BEGIN/END markers, tables, and fenced code blocks.

use crate::packaging::support::repo;

/// A documentation file's text, by its path from the repository root.
pub fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative))
        .unwrap_or_else(|e| panic!("{relative} cannot be read: {e}"))
}

/// The line that opens the generated section `name`; it says how to regenerate, for whoever
/// edits the file.
pub fn begin_marker(name: &str) -> String {
    format!("<!-- BEGIN GENERATED: {name} (NMO_REGENERATE=1 cargo test --test it generated_) -->")
}

/// The line that closes it.
pub fn end_marker(name: &str) -> String {
    format!("<!-- END GENERATED: {name} -->")
}

/// The text between the markers of section `name` (the lines after BEGIN up to END), as a
/// range of `text`.
pub fn generated_section(text: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let begin = begin_marker(name);
    let start = text.find(&begin)? + begin.len();
    let start = start + text[start..].find('\n')? + 1;
    let end = start + text[start..].find(&end_marker(name))?;
    Some(start..end)
}

#[test]
fn a_generated_section_is_found_between_its_markers() {
    let text = format!(
        "# Title\n{}\nold\n{}\nafter\n",
        begin_marker("x"),
        end_marker("x")
    );
    let range = generated_section(&text, "x").expect("a section");
    assert_eq!(&text[range], "old\n");
    assert!(generated_section(&text, "y").is_none());
}
