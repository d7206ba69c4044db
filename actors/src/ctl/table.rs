//! Plain text tables for the human output of `process-hub ctl`: columns padded to their
//! widest cell, two spaces apart, no borders (easy to read, easy to `grep` and `awk`).

/// A table with a header row.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as text, one line per row, each ending with a newline.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<w$}  "));
                }
            }
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
    fn cells_and_clock_read_naturally() {
        assert_eq!(cell(&serde_json::json!("x")), "x");
        assert_eq!(cell(&serde_json::Value::Null), "-");
        assert_eq!(cell(&serde_json::json!(3)), "3");
        assert_eq!(clock(3_723_004), "01:02:03.004");
    }
}
