//! A day on AWS at speed, shortened (issue 49's "done when"; `make
//! rehearse-day` runs the long one and writes its figures into
//! BENCHMARKS.md). The rehearsal's own code (`sim::day_rehearsal`) on each
//! engine: 32 stream shards split and rolled over until at least 250 are
//! listed, a flash sale as the order service writes it, both consumer forms
//! running all along (two guarded in-process consumers, and the built
//! binary as the Lambda function under the local event source mapping)
//! while the recorded mode goes serve → lambda → serve, the metrics table
//! refusing every write for 10 s, `serve`'s reconciliation every 20 s, and
//! every range the mapping gave up replayed. Asserted: the counters equal a
//! recount at the end; every reconciliation ran (none refused for the
//! shard count) and repaired nothing (every count it saw was right); a run
//! reads the open shards' checkpoints, not the listed ones; the counters'
//! write units per order are no more in the sale's last window than in its
//! first; and on the embedded store, its file stays flat over simulated
//! days once the stream is trimmed.
//!
//! Every process started (the Lambda function's environments) is stopped by
//! its pid, whatever the outcome.

use crate::common;

use northwind_ops::server::sim::day_rehearsal::{self, DayOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_at_speed_ends_exact_with_every_reconciliation_run_and_nothing_given_up_left_out() {
    let mut failed = Vec::new();
    for engine in common::engines() {
        let dir = tempfile::tempdir().unwrap();
        let base = common::store_config(&engine, dir.path(), &[]);
        let options = DayOptions::short(env!("CARGO_BIN_EXE_northwind-ops").into());
        let report = day_rehearsal::rehearse_day(&base, &options).await.unwrap();
        let table = day_rehearsal::comparison(&options, std::slice::from_ref(&report));
        println!("{engine:?}: {}", table.setup);
        for (label, cells) in &table.rows {
            println!("  {label}: {}", cells.join(" | "));
        }
        assert!(report.load.created > 1_000, "{engine:?}: the sale wrote {} orders", report.load.created);
        assert!(report.stream.rollovers > 0 && report.stream.splits > 0, "{engine:?}: {:?}", report.stream);
        assert!(report.mapping.records_done > 0 && report.serve_applied > 0, "{engine:?}: both forms counted");
        assert_eq!(report.file_sizes.is_empty(), matches!(engine, common::Engine::DynamoDbLocal(_)), "{engine:?}");
        let failures = report.failures();
        if !failures.is_empty() {
            failed.push(format!("{engine:?}:\n- {}", failures.join("\n- ")));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
