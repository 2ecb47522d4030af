//! Text for people and for keys: money, ages, URLs, timestamps.

use super::*;

/// Percent-encodes everything but unreserved characters and `/`, for a path
/// carried in a query value (`/login?next=...`).
pub fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Formats an amount in minor units, e.g. 12345 USD as "USD 123.45".
pub fn format_money(minor: i64, currency: &str) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{currency} {sign}{}.{:02}", abs / 100, abs % 100)
}

/// An amount that may not have been readable: "—" without a total, and
/// the amount with "(currency unknown)" without a currency.
pub fn format_amount(total: Option<i64>, currency: Option<&str>) -> String {
    match (total, currency) {
        (Some(total), Some(currency)) => format_money(total, currency),
        (Some(total), None) => format!("{} (currency unknown)", format_money(total, "").trim_start()),
        (None, _) => "—".into(),
    }
}

/// Formats the time between two instants as "42s", "17m", "3h 05m" or "2d 4h".
pub fn format_age(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A day on the wire as chrono writes it (`2026-12-04`), read without
/// chrono's general parser: its `FromStr`, which the default `Deserialize`
/// uses, was 6.7 KB of the dashboard's wasm (issue 34's first load) for the
/// one layout the server writes. The server also reads what API clients
/// send, so there anything else still goes to chrono, as before.
pub mod day {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn parse(s: &str) -> Option<NaiveDate> {
        as_written(s).or_else(|| as_chrono_reads(s))
    }

    #[cfg(feature = "ssr")]
    fn as_chrono_reads(s: &str) -> Option<NaiveDate> {
        s.parse().ok()
    }

    /// The wasm reads only what the server wrote.
    #[cfg(not(feature = "ssr"))]
    fn as_chrono_reads(_: &str) -> Option<NaiveDate> {
        None
    }

    /// `YYYY-MM-DD`, zero-padded.
    fn as_written(s: &str) -> Option<NaiveDate> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let number = |from: usize, to: usize| {
            b[from..to].iter().try_fold(0u32, |n, &c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
        };
        NaiveDate::from_ymd_opt(number(0, 4)? as i32, number(5, 7)?, number(8, 10)?)
    }

    pub fn serialize<S: Serializer>(day: &NaiveDate, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(day)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a day (YYYY-MM-DD)")))
    }
}

/// Timestamps are UTC ISO-8601 with exactly three fractional digits, so that
/// their strings sort as their instants do: the sort keys depend on it.
pub mod iso_millis {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn format(at: &DateTime<Utc>) -> String {
        at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    pub fn parse(s: &str) -> Result<DateTime<Utc>, String> {
        DateTime::parse_from_rfc3339(s)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| format!("{s:?} is not an ISO-8601 timestamp: {e}"))
    }

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => s.serialize_some(&format(at)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
            Option::<String>::deserialize(d)?.map(|s| parse(&s).map_err(serde::de::Error::custom)).transpose()
        }
    }
}
