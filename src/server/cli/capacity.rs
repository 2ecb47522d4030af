//! `plan` and `advise`: the GSI2 shard count for a peak, and the capacity
//! mode per table and index.

use super::CliError;
use crate::server::capacity::advisor::{self, Advice, Prices};
use crate::server::capacity::costs::{self, Definitions};
use crate::server::capacity::{history, planner};
use crate::server::cli::config::{AdviseArgs, PlanArgs, StoreConfig};
use crate::server::deploy::template::{
    self, BATCH_LOWER_SCHEDULE, BATCH_RAISE_SCHEDULE, Deployment, Setting, TableRole,
};
use crate::server::rules::{ON_DEMAND_WARM_WRITE_UNITS, TABLE_QUOTA_UNITS};
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::usage::{ReadWrite, Resource};
use crate::server::store::{self, Store};

pub(super) async fn run_plan(store: &Store, args: &PlanArgs) -> Result<(), CliError> {
    let peak = args.peak_orders_per_second;
    let item_bytes = match args.item_bytes {
        Some(bytes) => bytes,
        None => planner::gsi2_entry_bytes(&planner::typical_order(), store.shards())?,
    };
    let mut input = planner::PlanInput::for_writer(peak, item_bytes, args.writer);
    input.headroom = args.headroom;
    let plan = planner::plan(&input)?;
    println!("GSI2 write shards for a peak of {peak} orders a second ({}):", args.writer.describe());
    for step in &plan.steps {
        println!("  {step}");
    }
    println!("=> --shards {} (this store is set to {})", plan.shards, store.shards());
    print_warm_throughput(store).await?;
    let definitions = Definitions::program();
    let order = planner::typical_order();
    let writes = costs::order_writes(&definitions.table, args.writer, &order, store.shards())
        .map_err(|e| planner::PlanError::Sample(e.to_string()))?;
    let stream_shards = costs::stream_shards(peak * writes.units_on("table"), None);
    let counters = costs::counter_load(
        &definitions.counters,
        chrono::Utc::now(),
        peak * costs::CHANGES_PER_ORDER,
        stream_shards,
        plan.shards,
    )
    .map_err(|e| planner::PlanError::Sample(e.to_string()))?;
    let prewarm = planner::prewarm(peak, &writes, Some(&counters));
    println!("Before a sale of {peak} orders a second, pre-warm at least (write units a second):");
    for prewarm in &prewarm {
        println!("  {:<14} {:>10.0}  {}", prewarm.resource, prewarm.write_units_per_second.ceil(), prewarm.why);
    }
    println!(
        "  e.g. aws dynamodb update-table --table-name {} --warm-throughput WriteUnitsPerSecond=N,ReadUnitsPerSecond=M",
        store.orders_table()
    );
    print_sale_parameters(&prewarm);
    Ok(())
}

/// Prints the template's parameters for the sale.
fn print_sale_parameters(prewarm: &[planner::Prewarm]) {
    let (values, notes) = sale_parameters(prewarm);
    println!("Template parameters for this sale (aws cloudformation deploy --parameter-overrides):");
    println!("  {}", template::parameter_overrides(&values));
    for note in notes {
        println!("  {note}");
    }
    println!(
        "  (warm throughput only above the {ON_DEMAND_WARM_WRITE_UNITS:.0} writes a second a new on-demand table \
         takes at once; the on-demand maxima at {}x the peak)",
        planner::ON_DEMAND_MAX_HEADROOM
    );
}

/// Each table's and index's on-demand write maximum at twice the sale's
/// peak (a runaway writer is capped, the sale has room), and its warm
/// throughput where the peak is above what a new on-demand table takes at
/// once; a maximum over the account's default quota is held at it, with a
/// note.
fn sale_parameters(prewarm: &[planner::Prewarm]) -> (Vec<(String, String)>, Vec<String>) {
    let (mut values, mut notes) = (Vec::new(), Vec::new());
    for warm in prewarm {
        // `prewarm` names the orders table, its indexes, and the metrics table.
        let prefix = match warm.resource.as_str() {
            "table" => TableRole::Orders.prefix().to_string(),
            "metrics table" => TableRole::Metrics.prefix().to_string(),
            index => format!("{}{index}", TableRole::Orders.prefix()),
        };
        let peak = warm.write_units_per_second.ceil();
        // Never under what a new on-demand table takes at once: the metrics
        // table's other writers (sessions, the usage flushes) are not in the
        // sale's figure, and a sale written elsewhere costs it little.
        let mut max = (peak * f64::from(planner::ON_DEMAND_MAX_HEADROOM)).max(ON_DEMAND_WARM_WRITE_UNITS);
        let name = template::parameter(&prefix, Setting::OnDemandMax, ReadWrite::Write);
        if max > TABLE_QUOTA_UNITS {
            notes.push(format!(
                "{name}: {max:.0} is over the account's default quota of {TABLE_QUOTA_UNITS:.0} a table or index; \
                 held at it (ask AWS for more, then set it)"
            ));
            max = TABLE_QUOTA_UNITS;
        }
        values.push((name, format!("{max:.0}")));
        if peak > ON_DEMAND_WARM_WRITE_UNITS {
            values.push((template::parameter(&prefix, Setting::Warm, ReadWrite::Write), format!("{peak:.0}")));
        }
    }
    (values, notes)
}

/// What DescribeTable reports of each table's and index's warm throughput.
pub(super) async fn print_warm_throughput(store: &Store) -> Result<(), CliError> {
    let warm = match store.warm_throughput().await {
        Ok(warm) => warm,
        Err(StoreError::Unavailable { kind: Unavailable::NoTable, detail, .. }) => {
            println!("Warm throughput: unknown ({detail}; run `northwind-ops provision`)");
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    };
    println!("Warm throughput now (DescribeTable):");
    for w in warm {
        match (w.read_units_per_second, w.write_units_per_second) {
            (Some(read), Some(write)) => println!("  {:<40} {read} reads/s, {write} writes/s", w.resource),
            _ => println!("  {:<40} not reported by this engine", w.resource),
        }
    }
    Ok(())
}

/// The capacity mode per table and index over the last `--days` days, from
/// the capacity source's figures: the window, its coverage, and, on at least
/// a day observed, the mode to choose, what each costs a month, and why.
pub(super) async fn run_advise(store: &Store, args: &AdviseArgs, config: &StoreConfig) -> Result<(), CliError> {
    let (prices, priced_by) = match &args.prices {
        Some(path) => (Prices::from_json_file(path)?, path.display().to_string()),
        None => (Prices::default(), "us-east-1 defaults (November 2024)".to_string()),
    };
    let now = chrono::Utc::now();
    let source = config.capacity_source();
    let days = crate::server::service::figures::window_days(now.date_naive(), args.days);
    let figures = capacity_figures(store, config, &days, now).await?;
    let window: Vec<history::Day<'_>> =
        days.iter().zip(&figures).map(|(date, figures)| history::Day { date: *date, figures }).collect();
    let (series, window) = history::series(&window, now);
    if series.is_empty() {
        return Err(CliError::Usage(format!(
            "no capacity figures for {} to {} in the metrics table {} (source: {source}): run the app (serve) or \
             consume against these tables first; {}",
            days.first().unwrap_or(&now.date_naive()),
            now.date_naive(),
            config.metrics_table,
            advisor::Verdict::not_enough_history(0),
        )));
    }
    println!(
        "Capacity mode advice over {} days, {} to {} UTC; source: {}; {} of {} minutes observed ({:.1}% coverage); \
         prices: {priced_by}.",
        args.days,
        window.start.format("%Y-%m-%d %H:%M"),
        now.format("%Y-%m-%d %H:%M"),
        source_words(source),
        window.observed,
        window.minutes,
        window.coverage() * 100.0,
    );
    println!("Monthly figures scale the observed minutes to 30 days.");
    let mut advices = Vec::new();
    for series in &series {
        match advisor::recommend(series, &prices)? {
            advisor::Verdict::Advice(advice) => {
                print_advice(&advice);
                advices.push(*advice);
            }
            advisor::Verdict::NotEnoughHistory { resource, observed } => {
                println!();
                println!("{resource}: no recommendation");
                println!("  why           {}", advisor::Verdict::not_enough_history(observed));
            }
        }
    }
    print_template_parameters(store, &advices);
    Ok(())
}

/// Prints what the advice comes to in the template's parameters.
fn print_template_parameters(store: &Store, advices: &[Advice]) {
    let [orders, metrics] = store.table_defs(store::TableCapacity::OnDemand);
    let (values, notes) = template_parameters(&Deployment { orders, metrics }, advices);
    println!();
    println!("Template parameters (northwind-ops template; aws cloudformation deploy --parameter-overrides):");
    if !values.is_empty() {
        println!("  {}", template::parameter_overrides(&values));
    }
    for note in notes {
        println!("  {note}");
    }
}

/// Each table's billing mode (its indexes share it) and, provisioned, each
/// side's auto scaling range and month-end floor; and notes on what is
/// left out (a table with a resource not advised on gets nothing).
fn template_parameters(deployment: &Deployment, advices: &[Advice]) -> (Vec<(String, String)>, Vec<String>) {
    let advice_of = |sized: &template::TableOrIndex<'_>| {
        let wanted = Resource { table: sized.table.name.clone(), index: sized.index.map(str::to_string) };
        advices.iter().find(|a| Resource::parse(&a.resource).as_ref() == Some(&wanted))
    };
    let (mut values, mut notes, mut schedule) = (Vec::new(), Vec::new(), None);
    for role in [TableRole::Orders, TableRole::Metrics] {
        let sized: Vec<_> = deployment.tables_and_indexes().into_iter().filter(|s| s.role == role).collect();
        let found: Vec<Option<&Advice>> = sized.iter().map(advice_of).collect();
        if let Some(missing) = sized.iter().zip(&found).find(|(_, a)| a.is_none()).map(|(s, _)| s) {
            let name = missing.index.map_or(missing.table.name.clone(), |i| format!("{}/{i}", missing.table.name));
            notes.push(format!("{}: nothing yet, {name} has no recommendation", role.prefix()));
            continue;
        }
        let found: Vec<&Advice> = found.into_iter().flatten().collect();
        let mode = advisor::table_mode(&found);
        let billing = if mode == advisor::Mode::Provisioned { "PROVISIONED" } else { "PAY_PER_REQUEST" };
        values.push((template::billing_parameter(role), billing.to_string()));
        if mode != advisor::Mode::Provisioned {
            continue;
        }
        for (sized, advice) in sized.iter().zip(found) {
            let prefix = sized.prefix();
            for (side, usage) in [(ReadWrite::Read, &advice.read), (ReadWrite::Write, &advice.write)] {
                let (min, max) = usage.scaling_range();
                values.push((template::parameter(&prefix, Setting::Min, side), min.to_string()));
                values.push((template::parameter(&prefix, Setting::Max, side), max.to_string()));
                // The template schedules every month's batch; a one-off
                // burst is left to the scheduled actions printed above.
                let monthly =
                    advice.schedule.iter().filter(|f| f.access == side && f.raise_schedule.starts_with("cron("));
                let Some(floor) = monthly.max_by_key(|f| f.min_capacity) else { continue };
                values.push((template::parameter(&prefix, Setting::BatchMin, side), floor.min_capacity.to_string()));
                let this = (floor.raise_schedule.clone(), floor.lower_schedule.clone());
                match &schedule {
                    None => schedule = Some(this),
                    Some(first) if *first != this => notes.push(format!(
                        "{prefix} {side}: its batch runs {} to {}; the template's one schedule is the first seen",
                        this.0, this.1
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    if let Some((raise, lower)) = schedule {
        values.push((BATCH_RAISE_SCHEDULE.to_string(), raise));
        values.push((BATCH_LOWER_SCHEDULE.to_string(), lower));
    }
    (values, notes)
}

/// What a capacity source's figures are, in words.
pub(super) fn source_words(source: crate::server::store::config::CapacitySource) -> &'static str {
    match source {
        crate::server::store::config::CapacitySource::Stream => {
            "stream (writes of every writer, priced from the orders table's stream; reads of this app's calls)"
        }
        crate::server::store::config::CapacitySource::CloudWatch => "CloudWatch (DynamoDB's own AWS/DynamoDB metrics)",
    }
}

/// Each day's figures as the capacity source gives them.
pub(super) async fn capacity_figures(
    store: &Store,
    config: &StoreConfig,
    days: &[chrono::NaiveDate],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::server::capacity::sources::Figures>, CliError> {
    use crate::server::capacity::sources;
    use crate::server::store::config::CapacitySource;
    match config.capacity_source() {
        CapacitySource::Stream => {
            let recorded: Vec<store::CapacityDay> =
                futures::future::try_join_all(days.iter().map(|d| store.persisted_capacity_day(*d))).await?;
            Ok(recorded.iter().map(|day| sources::from_stream(day, store.orders_table())).collect())
        }
        CapacitySource::CloudWatch => {
            let start = days.first().map_or(now, |d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
            let read = store.cloudwatch_minutes(start, now).await?;
            Ok(days.iter().map(|day| sources::from_cloudwatch(&read, *day, now).0).collect())
        }
    }
}

pub(super) fn print_advice(advice: &Advice) {
    let side = |u: &advisor::Utilisation| {
        format!(
            "average {:.2}/s, peak {:.2}/s; {:.1}% of provisioned capacity on average",
            u.average_per_second,
            u.peak_per_second,
            u.average_utilisation * 100.0
        )
    };
    println!();
    println!("{}: {}", advice.resource, advice.mode);
    println!(
        "  monthly cost  on-demand ${:.4}; provisioned with auto scaling ${:.4}",
        advice.on_demand_monthly, advice.provisioned_monthly
    );
    println!("  writes        {}", side(&advice.write));
    println!("  reads         {}", side(&advice.read));
    println!("  why           {}", advice.reason);
    let resource = crate::server::store::usage::Resource::parse(&advice.resource);
    for floor in &advice.schedule {
        let (table, index) =
            resource.as_ref().map_or((advice.resource.as_str(), None), |r| (r.table.as_str(), r.index.as_deref()));
        for action in floor.put_scheduled_actions(table, index) {
            println!("  scheduled action (aws application-autoscaling put-scheduled-action --cli-input-json):");
            println!("{}", serde_json::to_string_pretty(&action).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Writer;
    use crate::server::capacity::advisor::{Minute, Prices, Series};
    use crate::server::store::{TableCapacity, TableDef};

    fn deployment() -> Deployment {
        Deployment {
            orders: TableDef::orders("northwind-orders", TableCapacity::OnDemand),
            metrics: TableDef::metrics("northwind-metrics", TableCapacity::OnDemand),
        }
    }

    /// Every name is a parameter of the template, every value one it takes.
    fn assert_valid(values: &[(String, String)]) {
        let template = template::template(&deployment());
        for (name, value) in values {
            let parameter = &template["Parameters"][name];
            assert!(parameter.is_object(), "{name} is no parameter of the template");
            if let Some(allowed) = parameter["AllowedValues"].as_array() {
                assert!(allowed.iter().any(|a| a == value), "{name}={value}");
            }
            if parameter["Type"] == "Number" {
                let number: f64 = value.parse().unwrap_or_else(|_| panic!("{name}={value}"));
                assert!(parameter["MinValue"].as_f64().is_none_or(|least| number >= least), "{name}={value}");
            }
        }
    }

    /// Two weeks of steady writes, 600 a minute, with a 3x batch at the
    /// month's end.
    fn advice(resource: &str) -> Advice {
        let start = "2026-11-17T00:00:00Z".parse().unwrap();
        let batch = 13 * 1440 + 22 * 60;
        let minutes = (0..14 * 1440)
            .map(|m| Minute { read_units: 60.0, write_units: if m >= batch { 1800.0 } else { 600.0 } })
            .collect();
        let series = Series { resource: resource.into(), start, minutes, observed: Vec::new() };
        advisor::advise(&series, &Prices::default()).unwrap()
    }

    #[test]
    fn the_advice_comes_to_template_parameters_for_whole_tables_only() {
        let orders: Vec<Advice> =
            ["northwind-orders", "northwind-orders/GSI1", "northwind-orders/GSI2"].map(advice).into();
        assert!(orders.iter().all(|a| a.mode == advisor::Mode::Provisioned && !a.schedule.is_empty()));
        let (values, notes) = template_parameters(&deployment(), &orders);
        assert_valid(&values);
        let value = |name: &str| values.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(value("OrdersBillingMode"), Some("PROVISIONED"));
        // 600 a minute want 15 units; the batch's floor 43; the maximum twice that.
        assert_eq!(value("OrdersGSI2WriteMin"), Some("15"));
        assert_eq!(value("OrdersGSI2WriteBatchMin"), Some("43"));
        assert_eq!(value("OrdersGSI2WriteMax"), Some("86"));
        assert_eq!(value("BatchRaiseSchedule"), Some("cron(50 21 L * ? *)"));
        assert_eq!(value("BatchLowerSchedule"), Some("cron(0 0 1 * ? *)"));
        assert_eq!(value("MetricsBillingMode"), None);
        assert_eq!(notes, ["Metrics: nothing yet, northwind-metrics has no recommendation"]);
        // A table with an index not advised on gets nothing.
        let (values, notes) = template_parameters(&deployment(), &orders[..2]);
        assert!(values.iter().all(|(n, _)| !n.starts_with("Orders")), "{values:?}");
        assert!(notes[0].contains("northwind-orders/GSI2"), "{notes:?}");
    }

    #[test]
    fn a_sale_comes_to_on_demand_maxima_and_warm_throughput() {
        let definitions = Definitions::program();
        let order = costs::order_of_size(700, 10).unwrap();
        let writes = |writer| costs::order_writes(&definitions.table, writer, &order, 10).unwrap();
        let prewarm = planner::prewarm(2000.0, &writes(Writer::Console), None);
        let (values, notes) = sale_parameters(&prewarm);
        assert_valid(&values);
        // Through the console: 2,000 orders/s × 2 changes × 2 (transactions) × 1 WCU = 8,000 on the table.
        assert!(values.contains(&("OrdersOnDemandMaxWrite".into(), "16000".into())), "{values:?}");
        assert!(values.contains(&("OrdersWarmWrite".into(), "8000".into())), "{values:?}");
        // The metrics table's three audit copies: 24,000 at peak, twice that
        // over the quota, held at it.
        assert!(values.contains(&("MetricsOnDemandMaxWrite".into(), "40000".into())), "{values:?}");
        assert!(notes.len() == 1 && notes[0].starts_with("MetricsOnDemandMaxWrite: 48000 is over"), "{notes:?}");
        // Another service writes them: plain writes, no audit records.
        let (service, notes) = sale_parameters(&planner::prewarm(2000.0, &writes(Writer::Service), None));
        // Half the table's writes: 4,000, what a new on-demand table takes at once.
        assert!(service.contains(&("OrdersOnDemandMaxWrite".into(), "8000".into())), "{service:?}");
        assert!(service.iter().all(|(name, _)| !name.contains("Warm")), "{service:?}");
        // The metrics table never capped under that either.
        assert!(service.contains(&("MetricsOnDemandMaxWrite".into(), "4000".into())), "{service:?}");
        assert!(notes.is_empty(), "{notes:?}");
        let (small, _) = sale_parameters(&planner::prewarm(10.0, &writes(Writer::Console), None));
        assert!(small.iter().all(|(name, _)| !name.contains("Warm")), "the default warm throughput covers it");
    }
}
