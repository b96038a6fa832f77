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

/// The rows of the first table after the first heading whose title starts with `heading` (case
/// insensitive), header and separator left out: each row as its cells, trimmed.
pub fn table_after_heading(text: &str, heading: &str) -> Option<Vec<Vec<String>>> {
    let wanted = heading.to_lowercase();
    let mut lines = text.lines();
    lines.find(|line| {
        line.starts_with('#')
            && line
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .starts_with(&wanted)
    })?;
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in lines {
        let trimmed = line.trim();
        if trimmed.starts_with('|') {
            in_table = true;
            rows.push(cells(trimmed));
        } else if in_table || trimmed.starts_with('#') {
            break;
        }
    }
    // The header row and the `| --- |` row.
    Some(rows.into_iter().skip(2).collect())
}

/// A table row's cells (`\|` inside a cell is not a separator).
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim_matches('|');
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    out.push(cell);
    out.into_iter()
        .map(|cell| cell.trim().to_string())
        .collect()
}

/// The `code spans` of a piece of Markdown.
pub fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn a_table_is_read_after_its_heading() {
    let text = "\
# Title
| other | table |
| --- | --- |
| `X` | no |
## Table here
| reason | what |
| --- | --- |
| `A` | one \\| two |
| `B` | three |

after
";
    let rows = table_after_heading(text, "table here").expect("a table");
    assert_eq!(rows, [["`A`", "one | two"], ["`B`", "three"]]);
    assert_eq!(code_spans(&rows[0][0]), ["A"]);
    assert!(table_after_heading(text, "no such heading").is_none());
}

/// README.md and every Markdown file of docs/, by path from the repository root, sorted.
pub fn documents() -> Vec<String> {
    let mut paths = vec!["README.md".to_string()];
    let entries = std::fs::read_dir(repo().join("docs")).expect("docs/ is readable");
    let mut docs: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            std::path::Path::new(name)
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("md"))
        })
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
}

/// A fenced code block: its language tag, the line its first line is on (1-based) and its
/// lines.
pub struct Block<'a> {
    pub language: &'a str,
    pub first_line: usize,
    pub lines: Vec<&'a str>,
}

/// The fenced (```) code blocks of a Markdown text, indented ones (in list items) included.
pub fn fenced_blocks(text: &str) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    let mut open: Option<Block<'_>> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(language) = trimmed.strip_prefix("```") {
                    open = Some(Block {
                        language: language.trim(),
                        first_line: index + 2,
                        lines: Vec::new(),
                    });
                }
            }
            Some(mut block) => {
                if trimmed.starts_with("```") {
                    blocks.push(block);
                } else {
                    block.lines.push(line);
                    open = Some(block);
                }
            }
        }
    }
    blocks
}

#[test]
fn fenced_blocks_are_found_in_list_items_too() {
    let text = "\
# Title
- a list item:
  ```sh
  nmo plan a
  ```
```yaml
kind: NodeMaintenance
```
";
    let blocks = fenced_blocks(text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].language, "sh");
    assert_eq!(blocks[0].first_line, 4);
    assert_eq!(blocks[0].lines, ["  nmo plan a"]);
    assert_eq!(blocks[1].language, "yaml");
}
