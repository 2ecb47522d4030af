//! The types the server, the JSON API and the pages share, by concern; every
//! one is re-exported here, so `crate::model::Order` names it wherever it lives.

mod access;
mod audit;
mod bulk;
mod capacity;
mod dashboard;
mod error;
mod format;
mod order;
mod params;
mod quality;
mod sale;

pub use access::*;
pub use audit::*;
pub use bulk::*;
pub use capacity::*;
pub use dashboard::*;
pub use error::*;
pub use format::*;
pub use order::*;
pub use params::*;
pub use quality::*;
pub use sale::*;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Page size when a request names none, and the most any request gets.
pub const DEFAULT_PAGE_SIZE: u32 = 25;
pub const MAX_PAGE_SIZE: u32 = 100;
/// The widest range of days one PENDING query may cover.
pub const MAX_DAYS: u32 = 31;
/// Longest order or customer id accepted.
pub const MAX_ID_LEN: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_read_as_one_kind() {
        let cases = [
            (400, ErrorKind::BadRequest),
            (401, ErrorKind::Unauthorized),
            (403, ErrorKind::Forbidden),
            (404, ErrorKind::NotFound),
            (405, ErrorKind::BadRequest),
            (408, ErrorKind::Unavailable),
            (409, ErrorKind::Conflict),
            (413, ErrorKind::BadRequest),
            (415, ErrorKind::BadRequest),
            (421, ErrorKind::Forbidden),
            (429, ErrorKind::TooManyRequests),
            (500, ErrorKind::Internal),
            (503, ErrorKind::Unavailable),
        ];
        for (status, kind) in cases {
            assert_eq!(ErrorKind::of_status(status), kind, "{status}");
        }
    }

    #[test]
    fn a_changed_event_names_its_day() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let event = LiveEvent::Changed { date: day };
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(json, r#"{"type":"changed","date":"2026-11-29"}"#);
        assert_eq!(serde_json::from_str::<LiveEvent>(&json).unwrap(), event);
        assert_eq!(event.date(), Some(day));
    }

    #[test]
    fn status_round_trips_and_rejects_unknown() {
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
        }
        assert!("pending".parse::<Status>().is_err());
    }

    #[test]
    fn roles_are_ordered_by_privilege_and_round_trip() {
        assert!(Role::Viewer < Role::Support && Role::Support < Role::Ops && Role::Ops < Role::Admin);
        assert_eq!(Role::ALL.iter().max(), Some(&Role::Admin));
        for role in Role::ALL {
            assert_eq!(role.to_string().parse::<Role>(), Ok(role));
            assert_eq!(serde_json::to_string(&role).unwrap(), format!("\"{role}\""));
            assert_eq!(serde_json::from_str::<Role>(&format!("\"{role}\"")).unwrap(), role);
        }
        let err = "Ops".parse::<Role>().unwrap_err();
        assert!(err.contains("\"Ops\"") && err.contains("viewer, support, ops or admin"), "{err}");
        assert!("".parse::<Role>().is_err());
    }

    #[test]
    fn transitions_follow_the_order_lifecycle() {
        assert!(Status::Pending.can_become(Status::Confirmed));
        assert!(Status::Pending.can_become(Status::Cancelled));
        assert!(Status::Confirmed.can_become(Status::Shipped));
        assert!(Status::Confirmed.can_become(Status::Cancelled));
        assert!(Status::Shipped.can_become(Status::Delivered));
        assert!(!Status::Shipped.can_become(Status::Cancelled));
        assert!(!Status::Delivered.can_become(Status::Pending));
        assert!(!Status::Pending.can_become(Status::Pending));
    }

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("order id", "o-123_ABC").is_ok());
        assert!(validate_id("order id", "").is_err());
        assert!(validate_id("order id", "a#b").unwrap_err().to_string().contains("'#'"));
        assert!(validate_id("order id", "ä").is_err());
        assert!(validate_id("order id", &"x".repeat(65)).is_err());
        assert!(validate_id("order id", &"x".repeat(64)).is_ok());
    }

    #[test]
    fn timestamps_have_millisecond_precision_and_sort_as_strings() {
        let a = iso_millis::parse("2026-11-29T08:00:00Z").unwrap();
        let b = iso_millis::parse("2026-11-29T08:00:00.5+00:00").unwrap();
        assert_eq!(iso_millis::format(&a), "2026-11-29T08:00:00.000Z");
        assert_eq!(iso_millis::format(&b), "2026-11-29T08:00:00.500Z");
        assert!(iso_millis::format(&a) < iso_millis::format(&b));
        assert!(iso_millis::parse("yesterday").is_err());
    }

    #[test]
    fn days_read_as_chrono_writes_them_and_the_server_still_reads_what_chrono_reads() {
        for day in ["2026-12-04", "1999-01-31", "2024-02-29", "0001-01-01", "9999-12-31"] {
            let parsed = day::parse(day).unwrap_or_else(|| panic!("{day}"));
            assert_eq!(parsed.to_string(), day);
            let json = serde_json::to_string(&DayShards { date: parsed, outcome: "written".into() }).unwrap();
            assert!(json.contains(&format!("\"date\":\"{day}\"")), "{json}");
            assert_eq!(serde_json::from_str::<DayShards>(&json).unwrap().date, parsed);
        }
        for bad in ["2026-13-01", "2026-02-30", "2026-12-0x", "20261204", "", "2026/12/04", "yesterday"] {
            assert_eq!(day::parse(bad), None, "{bad}");
        }
        // Whatever else chrono reads, the server reads as it did.
        for odd in ["2026-12-4", "2026-1-01", " 2026-12-04", "+2026-12-04", "12026-12-04"] {
            assert_eq!(day::parse(odd), odd.parse::<NaiveDate>().ok(), "{odd}");
        }
        let err = serde_json::from_str::<DayShards>(r#"{"date":"soon","outcome":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("\"soon\" is not a day (YYYY-MM-DD)"), "{err}");
    }

    #[test]
    fn money_and_ages_format_for_people() {
        assert_eq!(format_money(12345, "USD"), "USD 123.45");
        assert_eq!(format_money(-5, "EUR"), "EUR -0.05");
        let t0 = iso_millis::parse("2026-11-29T08:00:00Z").unwrap();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        assert_eq!(format_age(t0, at(42)), "42s");
        assert_eq!(format_age(t0, at(17 * 60 + 5)), "17m");
        assert_eq!(format_age(t0, at(3 * 3600 + 5 * 60)), "3h 05m");
        assert_eq!(format_age(t0, at(2 * 86_400 + 4 * 3600)), "2d 4h");
        assert_eq!(format_age(at(10), t0), "0s");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn ids_are_exactly_the_allowed_alphabet(id in ".{0,80}") {
                let allowed = !id.is_empty()
                    && id.len() <= MAX_ID_LEN
                    && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                prop_assert_eq!(validate_id("id", &id).is_ok(), allowed);
            }

            #[test]
            fn no_text_makes_timestamp_parsing_panic(text in ".{0,60}") {
                let _ = iso_millis::parse(&text);
            }

            #[test]
            fn timestamps_round_trip_at_millisecond_precision(millis in 946_684_800_000i64..4_102_444_800_000i64) {
                let at = DateTime::<Utc>::from_timestamp_millis(millis).unwrap();
                prop_assert_eq!(iso_millis::parse(&iso_millis::format(&at)), Ok(at));
            }
        }
    }
}
