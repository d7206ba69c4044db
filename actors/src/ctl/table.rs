//! Plain text tables for the human output of `process-hub ctl`: columns padded to their
//! widest cell, two spaces apart, no borders (easy to read, easy to `grep` and `awk`). The layout
//! is `comfy-table`'s, with every border off and no wrapping.

use comfy_table::presets::NOTHING;
use comfy_table::ContentArrangement;

/// The blank columns after each cell but the last.
const GAP: u16 = 2;

/// A table with a header row.
pub struct Table {
    inner: comfy_table::Table,
    columns: usize,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        let mut inner = comfy_table::Table::new();
        inner
            .load_style(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(header.to_vec());
        for column in inner.column_iter_mut() {
            column.set_padding((0, GAP));
        }
        Self {
            inner,
            columns: header.len(),
        }
    }

    /// Adds a row (missing cells are empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.columns, String::new());
        self.inner.add_row(cells);
    }

    /// The table as text, one line per row, each ending with a newline.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in self.inner.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A JSON value as a table cell: strings without quotes, `null` as `-`.
pub fn cell(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "-".to_owned(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A time of day from milliseconds since the Unix epoch, as `HH:MM:SS.mmm` UTC.
pub fn clock(at_ms: u64) -> String {
    let ms = at_ms % 1000;
    let secs = at_ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{ms:03}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_under_their_header() {
        let mut t = Table::new(&["ID", "NODE"]);
        t.row(vec!["c1".into(), "a@h".into()]);
        t.row(vec!["counter-long".into()]);
        assert_eq!(
            t.render(),
            "ID            NODE\nc1            a@h\ncounter-long\n"
        );
    }

    #[test]
    fn a_row_wider_than_the_header_keeps_the_header_s_columns() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["1".into(), "2".into(), "dropped".into()]);
        assert_eq!(t.render(), "A  B\n1  2\n");
    }

    #[test]
    fn a_table_without_rows_is_its_header() {
        assert_eq!(Table::new(&["ID", "KIND"]).render(), "ID  KIND\n");
    }

    #[test]
    fn cells_and_clock_read_naturally() {
        assert_eq!(cell(&serde_json::json!("x")), "x");
        assert_eq!(cell(&serde_json::Value::Null), "-");
        assert_eq!(cell(&serde_json::json!(3)), "3");
        assert_eq!(clock(3_723_004), "01:02:03.004");
    }
}
