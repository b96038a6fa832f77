//! Plain text tables: columns as wide as their widest cell, numbers right-aligned.

/// A table being built.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are blank, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, ending with a newline.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let cell = |row: &Vec<String>, c: usize| row.get(c).cloned().unwrap_or_default();
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| cell(r, c).chars().count())
                    .chain(std::iter::once(self.headers[c].chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(text, width)| {
                    if looks_numeric(text) {
                        format!("{text:>width$}")
                    } else {
                        format!("{text:<width$}")
                    }
                })
                .collect();
            format!("{}\n", padded.join("  ").trim_end())
        };
        let mut out = line(self.headers.clone());
        out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
        for row in &self.rows {
            out.push_str(&line((0..columns).map(|c| cell(row, c)).collect()));
        }
        out
    }
}

/// Figures (`12`, `1.5 s`, `3.2/pod`) align right; words align left.
fn looks_numeric(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut table = Table::new(&["node", "pods"]);
        table.row(vec!["node-10".into(), "7".into()]);
        table.row(vec!["n".into(), "12".into()]);
        assert_eq!(
            table.render(),
            "node     pods\n-------  ----\nnode-10     7\nn          12\n"
        );
    }
}
