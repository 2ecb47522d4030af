//! The key schema's tests: every key built and parsed back, the sort orders
//! readers rely on, the shard function, and each metrics-table partition
//! family with the commands that may reach it.

use super::*;

fn at(s: &str) -> DateTime<Utc> {
    iso_millis::parse(s).unwrap()
}

#[test]
fn only_the_live_counter_items_have_sub_items_in_their_own_partition() {
    let day = NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
    for key in [metric_pending_key(day), metric_day_key(day), metric_minutes_key(day, 7)] {
        let subs = counter_sub_keys(&key);
        assert_eq!(subs.len(), COUNTER_SUBS as usize);
        assert!(subs.iter().all(|(pk, sk)| *pk == key.0 && sk.starts_with(&key.1) && is_counter_sub_sk(sk)));
        assert!(!is_counter_sub_sk(&key.1), "{key:?}");
        // A sub-item has none of its own.
        assert_eq!(counter_sub_key(&subs[3], 1), None);
    }
    assert_eq!(counter_sub_key(&metric_pending_key(day), 7).unwrap().1, "COUNT#S07");
    assert_eq!(counter_sub_key(&metric_minutes_key(day, 10), 23).unwrap().1, "HOUR#10#S07");
    // The whole-day minute item of old versions, and everything else, as it is.
    for key in [metric_minutes_day_key(day), heat_key(day, 3), checkpoint_key("arn", "s-1"), shard_count_key(day)] {
        assert!(counter_sub_keys(&key).is_empty(), "{key:?}");
    }
    assert!(counter_sub_for("shardId-00001") < COUNTER_SUBS);
    assert_eq!(counter_sub_for("shardId-00001"), counter_sub_for("shardId-00001"));
}

#[test]
fn order_keys_round_trip() {
    assert_eq!(order_pk("o-1"), "ORDER#o-1");
    assert_eq!(parse_order_pk("ORDER#o-1"), Some("o-1"));
    assert_eq!(parse_order_pk("ORDER#"), None);
    assert_eq!(parse_order_pk("CUSTOMER#o-1"), None);
    assert_eq!(customer_pk("c-9"), "CUSTOMER#c-9");
}

#[test]
fn timeline_keys_sort_by_time_then_id() {
    let sk = timeline_sk(&at("2026-11-29T08:00:00Z"), "o-1");
    assert_eq!(sk, "2026-11-29T08:00:00.000Z#o-1");
    assert_eq!(parse_timeline_sk(&sk), Some((at("2026-11-29T08:00:00Z"), "o-1")));
    let earlier = timeline_sk(&at("2026-11-29T07:59:59.999Z"), "zzz");
    let same_time = timeline_sk(&at("2026-11-29T08:00:00Z"), "o-2");
    assert!(earlier < sk && sk < same_time);
    assert_eq!(parse_timeline_sk("2026-11-29T08:00:00Z#o-1"), None, "non-canonical time");
    assert_eq!(parse_timeline_sk("2026-11-29T08:00:00.000Z#"), None);
    assert_eq!(parse_timeline_sk("nonsense"), None);
}

#[test]
fn just_below_sits_between_a_key_and_every_smaller_key() {
    let key = timeline_sk(&at("2026-11-29T08:00:00Z"), "o-5");
    let bound = just_below(&key);
    assert!(bound < key);
    for smaller in [
        timeline_sk(&at("2026-11-29T08:00:00Z"), "o-4zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
        timeline_sk(&at("2026-11-29T08:00:00Z"), "o-"),
        timeline_sk(&at("2026-11-29T07:59:59.999Z"), "zzzz"),
    ] {
        assert!(smaller <= bound, "{smaller} should sort at or below {bound}");
    }
    assert!(timeline_sk(&at("2026-11-29T08:00:00Z"), "o-50") > bound);
}

#[test]
fn pending_keys_round_trip() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    assert_eq!(pending_pk(day, 7), "STATUS#PENDING#2026-11-29#7");
    assert_eq!(parse_pending_pk("STATUS#PENDING#2026-11-29#7"), Some((day, 7)));
    assert_eq!(parse_pending_pk("STATUS#PENDING#2026-13-29#7"), None);
    assert_eq!(parse_pending_pk("STATUS#SHIPPED#2026-11-29#7"), None);
    // Only the key a reader queries: no other spelling of the shard or
    // the day, and no shard at or past the most a day may have.
    for other in ["#+7", "#07", "# 7", "#100", "#4294967296"] {
        let pk = format!("STATUS#PENDING#2026-11-29{other}");
        assert_eq!(parse_pending_pk(&pk), None, "{pk}");
        assert!(is_unreadable_pending_pk(&pk), "{pk}");
    }
    assert_eq!(parse_pending_pk("STATUS#PENDING#2026-11-29#99"), Some((day, 99)));
    assert_eq!(parse_pending_pk("STATUS#PENDING#2026-1-29#7"), None);
    assert!(!is_unreadable_pending_pk("STATUS#PENDING#2026-11-29#7"));
    assert!(!is_unreadable_pending_pk("STATUS#SHIPPED#2026-11-29#7"));
    assert_eq!(parse_shard_attribute(&shard_attribute(57)), Some(57));
    for other in ["shard+5", "shard05", "shard100", "shards", "shard"] {
        assert_eq!(parse_shard_attribute(other), None, "{other}");
    }
    assert_eq!(shard_count_key(day), ("SHARDS#2026-11-29".into(), "CONFIG".into()));
    assert_eq!(parse_shard_count_pk("SHARDS#2026-11-29"), Some(day));
    assert_eq!(parse_shard_count_pk("SHARDS#tomorrow"), None);
}

#[test]
fn consumer_registry_keys_round_trip() {
    let (pk, sk) = consumer_key("in-process", "host-12-ab#c");
    assert_eq!((pk.as_str(), sk.as_str()), ("CONSUMERS", "in-process#host-12-ab#c"));
    assert_eq!(parse_consumer_sk(&sk), Some(("in-process", "host-12-ab#c")));
    assert_eq!(parse_consumer_sk("lambda#"), None);
    assert_eq!(parse_consumer_sk("lambda"), None);
    assert_eq!(partition_of(consumers_pk()), Some(CONSUMERS));
}

#[test]
fn metric_keys() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    assert_eq!(metric_pending_key(day), ("METRIC#PENDING#2026-11-29".into(), "COUNT".into()));
    assert_eq!(metric_day_key(day).0, "METRIC#DAY#2026-11-29");
    assert_eq!(metric_minutes_key(day, 7), ("METRIC#MINUTES#2026-11-29".to_string(), "HOUR#07".to_string()));
    assert_eq!(metric_minutes_key(day, 23).1, "HOUR#23");
    assert_eq!(metric_minutes_day_key(day), ("METRIC#MINUTES#2026-11-29".to_string(), "COUNT".to_string()));
    let all = metric_minutes_keys(day);
    assert_eq!(
        (all.len(), all[0].clone(), all[24].clone()),
        (25, metric_minutes_day_key(day), metric_minutes_key(day, 23))
    );
    assert!(all.iter().all(|(pk, _)| pk == &metric_minutes_pk(day)), "one partition: one Query reads the day");
    assert_eq!(metric_day_of(&metric_minutes_key(day, 5).0), Some(day));
    assert_eq!(shard_attribute(3), "shard3");
    assert_eq!(status_attribute("PENDING"), "statusPENDING");
    assert_eq!(minute_attribute('c', 0), "c0000");
    assert_eq!(minute_attribute('l', 1439), "l2359");
    assert_eq!(
        checkpoint_key("arn:aws:dynamodb:x", "shardId-1"),
        ("CHECKPOINT#arn:aws:dynamodb:x".into(), "SHARD#shardId-1".into())
    );
    assert_eq!(parse_checkpoint_sk("SHARD#shardId-1"), Some("shardId-1"));
    assert_eq!(parse_checkpoint_sk("SHARD#"), None);
    assert_eq!(reconcile_reader_key("arn:x"), ("RECONCILE#arn:x".into(), "READER".into()));
    assert_eq!(applied_key("c4ca4238a0b9"), ("APPLIED#c4ca4238a0b9".into(), "RECORD".into()));
}

#[test]
fn applied_ranges_sort_by_their_last_record_as_numbers() {
    let (pk, sk) = applied_range_key("arn:s", "shardId-1", "100", "250");
    assert_eq!(pk, "RANGES#arn:s#shardId-1");
    assert_eq!(sk, format!("{:0>40}#{:0>40}", "250", "100"));
    assert_eq!(seq_sort_key("007"), seq_sort_key("7"), "leading zeros say nothing");
    // String order is numeric order, whatever the lengths (21 to 40 digits).
    let seqs = ["9", "10", "99", "100000000000000000000", "49000000000000000000001", &"9".repeat(40)];
    for pair in seqs.windows(2) {
        assert!(applied_range_sk(pair[0], "1") < applied_range_sk(pair[1], "1"), "{pair:?}");
        // Where a Query for ranges ending at or after a record starts.
        assert!(applied_range_sk(pair[1], "") <= applied_range_sk(pair[1], "1"), "{pair:?}");
        assert!(applied_range_sk(pair[1], "") > applied_range_sk(pair[0], &"9".repeat(40)), "{pair:?}");
    }
    // Not the markers' family: `APPLIED#` leads no range key.
    assert_eq!(partition_of(&pk), Some(RANGES));
}

#[test]
fn state_attributes_are_the_recountable_ones() {
    for name in ["pending", "created", "shard0", "shard99", "statusPENDING", "c0000", "c2359"] {
        assert!(is_state_attribute(name), "{name}");
    }
    for name in
        ["e1015", "l1015", "repairs", "verifiedAt", "version", "shard", "shardx", "status", "c123", "c12345", "cxxxx"]
    {
        assert!(!is_state_attribute(name), "{name}");
    }
}

#[test]
fn account_and_audit_keys() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    assert_eq!(user_key("alice"), ("USERS".into(), "USER#alice".into()));
    assert_eq!(token_key("loadgen"), ("TOKENS".into(), "TOKEN#loadgen".into()));
    assert_eq!(session_key("abc"), ("SESSION#abc".into(), "SESSION".into()));
    assert_eq!(sale_plan_key("black friday"), ("SALES".into(), "PLAN#black friday".into()));
    let rehearsals = sale_rehearsal_key("black friday");
    assert_eq!(rehearsals, ("SALES".into(), "REHEARSAL#black friday".into()));
    assert!(is_sale_plan_sk(&sale_plan_key("x").1) && !is_sale_plan_sk(&rehearsals.1));
    assert_eq!(audit_order_pk("o-1"), "AUDIT#ORDER#o-1");
    assert_eq!(audit_day_pk(day, 3), "AUDIT#DAY#2026-11-29#3");
    assert_eq!(audit_actor_pk("alice", 0), "AUDIT#ACTOR#alice#0");
    assert_eq!(audit_sk(&at("2026-11-29T08:00:00Z"), "e1"), "2026-11-29T08:00:00.000Z#e1");
}

#[test]
fn every_metrics_key_is_in_one_partition_family_and_each_command_has_its_own() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    let keys = [
        (shard_count_key(day).0, SHARDS),
        (metric_pending_key(day).0, METRIC_PENDING),
        (metric_day_key(day).0, METRIC_DAY),
        (metric_minutes_key(day, 12).0, METRIC_MINUTES),
        (checkpoint_key("arn:aws:dynamodb:x:1:table/t/stream/s", "shardId-1").0, CHECKPOINT),
        (applied_key("e1").0, APPLIED),
        (applied_range_key("arn:aws:dynamodb:x:1:table/t/stream/s", "shardId-1", "1", "9").0, RANGES),
        (reconcile_reader_key("arn:s").0, RECONCILE),
        (capacity_pk(day), CAPACITY),
        (heat_key(day, 7).0, HEAT),
        (quality_pk(day), QUALITY),
        (consumer_key("lambda", "f").0, CONSUMERS),
        (user_key("alice").0, USERS),
        (token_key("loadgen").0, TOKENS),
        (session_key("abc").0, SESSION),
        (bulk_key("b1").0, BULK),
        (audit_order_pk("o-1"), AUDIT_ORDER),
        (audit_day_pk(day, 3), AUDIT_DAY),
        (audit_actor_pk("alice", 0), AUDIT_ACTOR),
        (sale_plan_key("black-friday").0, SALES),
    ];
    assert_eq!(keys.len(), METRICS_PARTITIONS.len(), "a key builder per family");
    for (pk, family) in keys {
        assert_eq!(partition_of(&pk), Some(family), "{pk}");
        let pattern = leading_keys_pattern(family);
        assert!(pattern == pk || pk.starts_with(pattern.trim_end_matches('*')), "{pattern} {pk}");
    }
    assert_eq!(partition_of("ORDER#o-1"), None);
    assert_eq!(partition_of("USERSX"), None, "a whole key is matched whole");
    for access in METRICS_ACCESS {
        for family in access.reads.iter().copied().chain(access.writes()) {
            assert!(METRICS_PARTITIONS.contains(&family), "{}: {family}", access.command);
        }
        let credentials =
            access.reads.iter().copied().chain(access.writes()).any(|f| CREDENTIAL_PARTITIONS.contains(&f));
        assert_eq!(credentials, ["web", "serve", "admin"].contains(&access.command), "{}", access.command);
        // The audit trail is appended to, never changed.
        for family in AUDIT_PARTITIONS {
            assert!(!access.updates.contains(&family) && !access.deletes.contains(&family), "{}", access.command);
        }
        assert!(!access.deletes.contains(&CHECKPOINT), "{}: checkpoints expire, never deleted", access.command);
    }
    let consumer = metrics_access("lambda").unwrap();
    assert!(consumer.puts.contains(&APPLIED) && consumer.updates.contains(&METRIC_PENDING));
    for role in ["web", "serve"] {
        assert!(!metrics_access(role).unwrap().writes().any(|f| f == APPLIED), "the markers are the Lambda's");
    }
    let web = metrics_access("web").unwrap();
    assert!(!web.writes().any(|f| [HEAT, QUALITY, CONSUMERS].contains(&f)), "the consumer's");
    // Its reconciliation only marks a closed shard's checkpoint finished
    // (an update conditioned on where it stands): it never puts one.
    assert!(!web.puts.contains(&CHECKPOINT), "the consumer's");
}

#[test]
fn shard_function_is_stable() {
    // Fixed values: a change here would strand every PENDING order
    // already written under the old shard numbers.
    assert_eq!(shard_of("o-1", 10), (xxhash_rust::xxh3::xxh3_64(b"o-1") % 10) as u32);
    assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2D06800538D394C2);
    assert_eq!(shard_of("anything", 1), 0);
    assert_eq!(shard_of("anything", 0), 0, "a zero count never divides by zero");
}

#[test]
fn shard_function_spreads_evenly() {
    let n = 10;
    let total = 100_000;
    let mut counts = vec![0u32; n as usize];
    for i in 0..total {
        counts[shard_of(&format!("ord-{i:08}"), n) as usize] += 1;
    }
    let expected = f64::from(total / n);
    for (shard, count) in counts.iter().enumerate() {
        let off = (f64::from(*count) - expected).abs() / expected;
        assert!(off < 0.03, "shard {shard} holds {count}, {:.1}% off even", off * 100.0);
    }
}

#[test]
fn capacity_and_heat_keys_round_trip() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    assert_eq!(capacity_pk(day), "CAPACITY#2026-11-29");
    assert_eq!(capacity_units_sk("orders/GSI2"), "UNITS#orders/GSI2");
    assert_eq!(parse_capacity_sk("UNITS#orders/GSI2"), Some(CapacitySk::Units { resource: "orders/GSI2" }));
    let sk = capacity_throttles_sk("IndexWriteKeyRangeThroughputExceeded", "table/orders/index/GSI2");
    assert_eq!(sk, "THROTTLES#IndexWriteKeyRangeThroughputExceeded#table/orders/index/GSI2");
    assert_eq!(
        parse_capacity_sk(&sk),
        Some(CapacitySk::Throttles {
            reason: "IndexWriteKeyRangeThroughputExceeded",
            resource: "table/orders/index/GSI2"
        })
    );
    assert_eq!(parse_capacity_sk("UNITS#"), None);
    assert_eq!(capacity_stream_sk("orders/GSI1", 7), "STREAM#07#orders/GSI1");
    assert_eq!(parse_capacity_sk("STREAM#07#orders/GSI1"), Some(CapacitySk::Stream { resource: "orders/GSI1" }));
    assert_eq!(parse_capacity_sk("STREAM#7#orders"), None);
    assert_eq!(capacity_hot_sk(615), "HOTKEYS#1015");
    assert_eq!(parse_capacity_sk("HOTKEYS#1015"), Some(CapacitySk::Hot { minute: 615 }));
    assert_eq!(parse_capacity_sk("HOTKEYS#2460"), None);
    assert_eq!(parse_capacity_sk(&capacity_observed_sk(23)), Some(CapacitySk::Observed));
    assert_eq!(parse_capacity_sk("OBSERVED#24"), None);
    let attribute = hot_key_attribute("orders/GSI1", "CUSTOMER#c|1");
    assert_eq!(parse_hot_key_attribute(&attribute), Some(("orders/GSI1", "CUSTOMER#c|1")));
    let long = "é".repeat(150);
    let cut = hot_key_attribute("orders", &long);
    assert!(cut.len() < 230 && cut != hot_key_attribute("orders", &format!("{long}x")), "{cut}");
    assert_eq!(parse_capacity_sk("THROTTLES#reason"), None);
    assert_eq!(capacity_minute_attribute('w', 615), "w1015");
    assert_eq!(parse_minute_attribute("w1015"), Some(('w', 615)));
    assert_eq!(parse_minute_attribute("r2359"), Some(('r', 1439)));
    for bad in ["w2400", "w1060", "w101", "w10155", "wxxxx", ""] {
        assert_eq!(parse_minute_attribute(bad), None, "{bad}");
    }
    assert_eq!(heat_key(day, 7), ("HEAT#2026-11-29#07".into(), "COUNT".into()));
    assert_eq!(heat_attribute(5, 3), "m05s3");
    assert_eq!(parse_heat_attribute("m05s3"), Some((5, 3)));
    assert_eq!(parse_heat_attribute("m59s99"), Some((59, 99)));
    for bad in ["m60s1", "m5s1", "m05s", "m05s100", "x05s1", "m05"] {
        assert_eq!(parse_heat_attribute(bad), None, "{bad}");
    }
    assert!(!is_state_attribute("m05s3"), "heat is history");
}

#[test]
fn quality_keys_round_trip() {
    let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
    let capacity = (capacity_pk(day), capacity_stream_sk("orders", 7));
    let quality = |sk: String| (quality_pk(day), sk);
    for observation in [capacity, heat_key(day, 7), quality(quality_hour_sk(7))] {
        assert!(is_observation(&observation), "{observation:?}");
    }
    let chosen = [quality(quality_largest_sk(7)), quality(quality_sample_sk("ORDER", "status"))];
    for key in &chosen {
        assert!(is_chosen_observation(key), "{key:?}");
    }
    for other in chosen.into_iter().chain([metric_pending_key(day), metric_minutes_key(day, 7), applied_key("x")]) {
        assert!(!is_observation(&other), "{other:?}");
    }
    for other in [quality(quality_hour_sk(7)), metric_pending_key(day), heat_key(day, 7), applied_key("x")] {
        assert!(!is_chosen_observation(&other), "{other:?}");
    }
    let marker = applied_key(&window_marker_id("shardId-1", "2026-12-04T17:00:00Z", "42")).0;
    assert_eq!(marker, "APPLIED#WINDOW#shardId-1#2026-12-04T17:00:00Z#42");
    assert_eq!(quality_pk(day), "QUALITY#2026-11-29");
    assert_eq!(parse_quality_sk(&quality_hour_sk(7)), Some(QualitySk::Hour(7)));
    assert_eq!(parse_quality_sk(&quality_largest_sk(23)), Some(QualitySk::Largest(23)));
    let sample = quality_sample_sk("missing", "total");
    assert_eq!(sample, "SAMPLE#missing|total");
    assert_eq!(parse_quality_sk(&sample), Some(QualitySk::Sample { kind: "missing", field: "total" }));
    for bad in ["HOUR#24", "HOUR#7", "HOUR#070", "LARGEST#", "SAMPLE#missing", "SAMPLE#|total", "OTHER"] {
        assert_eq!(parse_quality_sk(bad), None, "{bad}");
    }
    assert_eq!(parse_drift_attribute(&drift_attribute("mistyped", "total")), Some(("mistyped", "total")));
    assert_eq!(parse_drift_attribute("k|x"), None);
    assert_eq!(parse_size_bucket_attribute(&size_bucket_attribute(80)), Some(80));
    assert_eq!(parse_size_bucket_attribute("z"), None);
    assert_eq!(parse_resource_units_attribute(&resource_units_attribute("orders/GSI1")), Some("orders/GSI1"));
    let at = at("2026-11-29T08:00:00Z");
    let attribute = quality_sample_attribute(&at, "ORDER#o|1");
    assert_eq!(parse_quality_sample_attribute(&attribute), Some((at, "ORDER#o|1")));
    assert!(bounded_key(&"k".repeat(1000)).len() < 230);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_text_makes_key_parsing_panic(text in ".{0,120}") {
            let _ = parse_order_pk(&text);
            let _ = parse_timeline_sk(&text);
            let _ = parse_pending_pk(&text);
            let _ = parse_shard_count_pk(&text);
            let _ = parse_checkpoint_sk(&text);
            let _ = just_below(&text);
            let _ = parse_capacity_sk(&text);
            let _ = parse_minute_attribute(&text);
            let _ = parse_heat_attribute(&text);
            let _ = parse_quality_sk(&text);
            let _ = parse_drift_attribute(&text);
            let _ = parse_size_bucket_attribute(&text);
            let _ = parse_quality_sample_attribute(&text);
            let _ = bounded_key(&text);
        }

        #[test]
        fn timeline_keys_round_trip(millis in 946_684_800_000i64..4_102_444_800_000i64, id in "[A-Za-z0-9_-]{1,64}") {
            let at = DateTime::<Utc>::from_timestamp_millis(millis).unwrap();
            let sk = timeline_sk(&at, &id);
            prop_assert_eq!(parse_timeline_sk(&sk), Some((at, id.as_str())));
            prop_assert!(just_below(&sk) < sk);
        }

        #[test]
        fn pending_keys_round_trip(days in 0i64..40_000, shard in 0u32..MAX_SHARDS) {
            let day = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap() + chrono::Duration::days(days);
            prop_assert_eq!(parse_pending_pk(&pending_pk(day, shard)), Some((day, shard)));
            prop_assert_eq!(parse_shard_count_pk(&shard_count_key(day).0), Some(day));
        }
    }
}
