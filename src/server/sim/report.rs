//! What a rehearsal compares, as data: a sentence on the setup, one column
//! per run, one row per figure. The command line prints it as a plain
//! table; the benchmark harness writes it into BENCHMARKS.md as markdown.

/// Runs side by side: `rows` hold one cell per column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// What was run, in a sentence or two.
    pub setup: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
}

impl Comparison {
    pub fn new(setup: String, columns: Vec<String>) -> Self {
        Self { setup, columns, rows: Vec::new() }
    }

    /// A row: its label and each column's cell.
    pub fn row<R>(&mut self, label: impl Into<String>, runs: &[R], cell: impl Fn(&R) -> String) {
        self.rows.push((label.into(), runs.iter().map(cell).collect()));
    }
}
