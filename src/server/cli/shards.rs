//! `shards`: a day's GSI2 shard count as every writer must use it
//! (`store::shard_count`), and where it comes from; `--write-ahead` records
//! it where none is.

use super::{CliError, cli_date};
use crate::model::AuditKind;
use crate::server::cli::config::ShardsArgs;
use crate::server::store::{Store, keys, shard_count};
use chrono::Days;

pub(super) async fn run_shards(store: &Store, args: &ShardsArgs) -> Result<(), CliError> {
    let first = cli_date("--day", args.day.as_deref())?;
    let days: Vec<_> = (0..u64::from(args.days)).filter_map(|n| first.checked_add_days(Days::new(n))).collect();
    if args.write_ahead {
        let configured: Vec<_> = days.iter().map(|day| (*day, store.shards())).collect();
        let recorded = store.record_days_ahead(&configured).await?;
        for day in &recorded {
            eprintln!("recorded the shard count of {day}");
        }
        if !recorded.is_empty() {
            let days = recorded.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            let detail = format!("{} shards for {days}", store.shards());
            super::users::record(store, AuditKind::ShardsWritten, "shards --write-ahead", Some(detail)).await;
        }
    }
    let recorded = store.recorded_shards_now(&days).await?;
    for day in days {
        let recorded = recorded.get(&day).copied().flatten();
        let count = shard_count::day_count(recorded, store.shards());
        let (pk, sk) = keys::shard_count_key(day);
        let source = if recorded.is_some() { "recorded" } else { "configured" };
        if args.json {
            let line = serde_json::json!({
                "day": day.to_string(), "shards": count, "source": source,
                "table": store.metrics_table(), "pk": pk, "sk": sk,
            });
            println!("{line}");
        } else {
            let how = match recorded {
                Some(_) => format!("recorded in {} as {pk} / {sk}", store.metrics_table()),
                None => format!("configured (--shards): no {pk} / {sk} in {}", store.metrics_table()),
            };
            println!("{day}  {count} shards  {how}");
        }
    }
    Ok(())
}
