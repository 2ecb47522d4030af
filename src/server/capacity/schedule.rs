//! Application Auto Scaling's schedule expressions, read far enough to say
//! when a scheduled action runs: `at(yyyy-mm-ddThh:mm:ss)` and
//! `cron(minutes hours day-of-month month day-of-week year)` with `*`,
//! `?`, lists, ranges, steps, month and day names and a day-of-month `L`,
//! in UTC. `rate(...)`, cron's `W` and `#`, a day-of-week `L` and any other
//! time zone are refused with the reason: the readiness check then says the
//! action was not read, never guesses when it runs.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};

/// When a scheduled action runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    At(DateTime<Utc>),
    Cron(Box<Cron>),
}

/// Each cron field as the values it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: Vec<bool>,
    hours: Vec<bool>,
    /// Days of the month 1 to 31 (index 0 unused); `None`: `?`.
    days: Option<Vec<bool>>,
    /// `L`: the month's last day.
    last_day: bool,
    months: Vec<bool>,
    /// Sunday 1 to Saturday 7 (index 0 unused); `None`: `?`.
    weekdays: Option<Vec<bool>>,
    /// 1970 to 2199, from 1970.
    years: Vec<bool>,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const FIRST_YEAR: u32 = 1970;
const LAST_YEAR: u32 = 2199;

/// A schedule and its time zone as DescribeScheduledActions gives them.
pub fn parse(expression: &str, timezone: Option<&str>) -> Result<Schedule, String> {
    if let Some(zone) = timezone.filter(|z| !matches!(*z, "UTC" | "Etc/UTC" | "GMT" | "Etc/GMT" | "Z" | "")) {
        return Err(format!("its time zone {zone} is not read here (only UTC)"));
    }
    let expression = expression.trim();
    if let Some(at) = inner(expression, "at") {
        let time = NaiveDateTime::parse_from_str(at.trim(), "%Y-%m-%dT%H:%M:%S")
            .map_err(|e| format!("{expression} is not at(yyyy-mm-ddThh:mm:ss): {e}"))?;
        return Ok(Schedule::At(time.and_utc()));
    }
    if let Some(cron) = inner(expression, "cron") {
        return Ok(Schedule::Cron(Box::new(parse_cron(cron).map_err(|e| format!("{expression}: {e}"))?)));
    }
    Err(format!("{expression} is neither at(...) nor cron(...)"))
}

fn inner<'a>(expression: &'a str, word: &str) -> Option<&'a str> {
    expression.strip_prefix(word)?.trim_start().strip_prefix('(')?.strip_suffix(')')
}

fn parse_cron(text: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [minutes, hours, days, months, weekdays, years] = fields[..] else {
        return Err(format!("a cron expression has 6 fields, not {}", fields.len()));
    };
    // Day names hold no L or # (WED holds a W: only the day of month's W is cron's).
    if days.contains('W') || weekdays.contains('#') {
        return Err("cron's W and # are not read here".into());
    }
    if weekdays.to_ascii_uppercase().contains('L') {
        return Err("a day-of-week L is not read here".into());
    }
    let last_day = days == "L";
    Ok(Cron {
        minutes: field(minutes, 0, 59, &[])?,
        hours: field(hours, 0, 23, &[])?,
        days: match days {
            "?" | "L" => None,
            _ => Some(field(days, 1, 31, &[])?),
        },
        last_day,
        months: field(months, 1, 12, &MONTHS)?,
        weekdays: (weekdays != "?").then(|| field(weekdays, 1, 7, &WEEKDAYS)).transpose()?,
        years: shifted(field(years, FIRST_YEAR, LAST_YEAR, &[])?, FIRST_YEAR),
    })
}

/// The values a field matches, indexed by value (`lo` to `hi`).
fn field(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<Vec<bool>, String> {
    let mut matches = vec![false; hi as usize + 1];
    let value = |word: &str| -> Result<u32, String> {
        let upper = word.to_ascii_uppercase();
        let value = match names.iter().position(|n| *n == upper) {
            Some(i) => i as u32 + 1,
            None => word.parse::<u32>().map_err(|_| format!("{word:?} is not a value of {text:?}"))?,
        };
        if (lo..=hi).contains(&value) { Ok(value) } else { Err(format!("{value} is outside {lo}-{hi}")) }
    };
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, step.parse::<u32>().map_err(|_| format!("bad step in {part:?}"))?.max(1)),
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" | "?" => (lo, hi),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if part.contains('/') => (value(range)?, hi),
                None => (value(range)?, value(range)?),
            },
        };
        let mut at = from;
        while at <= to {
            matches[at as usize] = true;
            at += step;
        }
    }
    Ok(matches)
}

/// Years indexed from `FIRST_YEAR`.
fn shifted(values: Vec<bool>, from: u32) -> Vec<bool> {
    values.into_iter().skip(from as usize).collect()
}

impl Cron {
    fn runs_on(&self, day: NaiveDate) -> bool {
        let year_ok = (day.year() as u32)
            .checked_sub(FIRST_YEAR)
            .and_then(|i| self.years.get(i as usize).copied())
            .unwrap_or(false);
        let last = (day + Duration::days(1)).month() != day.month();
        let day_ok = match (&self.days, self.last_day) {
            (_, true) => last,
            (Some(days), false) => days[day.day() as usize],
            (None, false) => true,
        };
        let weekday_ok = self.weekdays.as_ref().is_none_or(|w| w[day.weekday().number_from_sunday() as usize]);
        year_ok && self.months[day.month() as usize] && day_ok && weekday_ok
    }
}

impl Schedule {
    /// The last time it runs in `(after, until]`, if it does.
    pub fn last_run(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::At(at) => (*at > after && *at <= until).then_some(*at),
            Schedule::Cron(cron) => {
                let mut day = until.date_naive();
                while day >= after.date_naive() {
                    if cron.runs_on(day) {
                        for hour in (0..24u32).rev().filter(|h| cron.hours[*h as usize]) {
                            for minute in (0..60u32).rev().filter(|m| cron.minutes[*m as usize]) {
                                let at = Utc.from_utc_datetime(&day.and_hms_opt(hour, minute, 0)?);
                                if at > after && at <= until {
                                    return Some(at);
                                }
                            }
                        }
                    }
                    day = day.pred_opt()?;
                }
                None
            }
        }
    }
}

/// `at(...)` of a time, to the second, as a scheduled action takes it.
pub fn at(time: DateTime<Utc>) -> String {
    format!("at({})", time.with_nanosecond(0).unwrap_or(time).format("%Y-%m-%dT%H:%M:%S"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn at_runs_once_at_its_time() {
        let schedule = parse("at(2026-11-27T08:45:00)", Some("Etc/UTC")).unwrap();
        assert_eq!(
            schedule.last_run(t("2026-11-20T00:00:00Z"), t("2026-11-27T09:00:00Z")),
            Some(t("2026-11-27T08:45:00Z"))
        );
        assert_eq!(schedule.last_run(t("2026-11-20T00:00:00Z"), t("2026-11-27T08:44:00Z")), None);
        assert_eq!(at(t("2026-11-27T08:45:00Z")), "at(2026-11-27T08:45:00)");
    }

    #[test]
    fn cron_finds_its_last_run_before_a_time() {
        // The template's month-end batch raise: 22:00 on every month's last day.
        let batch = parse("cron(0 22 L * ? *)", None).unwrap();
        assert_eq!(
            batch.last_run(t("2026-10-01T00:00:00Z"), t("2026-11-27T09:00:00Z")),
            Some(t("2026-10-31T22:00:00Z"))
        );
        assert_eq!(batch.last_run(t("2026-11-01T00:00:00Z"), t("2026-11-27T09:00:00Z")), None);
        // Every Friday at 08:30.
        let fridays = parse("cron(30 8 ? * FRI *)", None).unwrap();
        assert_eq!(
            fridays.last_run(t("2026-11-20T10:00:00Z"), t("2026-11-27T09:00:00Z")),
            Some(t("2026-11-27T08:30:00Z"))
        );
        let every_quarter_hour = parse("cron(0/15 6-9 27 11 ? 2026)", None).unwrap();
        assert_eq!(
            every_quarter_hour.last_run(t("2026-11-20T10:00:00Z"), t("2026-11-27T09:10:00Z")),
            Some(t("2026-11-27T09:00:00Z"))
        );
        assert_eq!(
            every_quarter_hour.last_run(t("2026-11-20T10:00:00Z"), t("2027-11-27T09:10:00Z")),
            Some(t("2026-11-27T09:45:00Z"))
        );
    }

    #[test]
    fn what_is_not_read_is_refused_with_the_reason() {
        assert!(parse("rate(5 minutes)", None).unwrap_err().contains("neither"));
        assert!(parse("cron(0 8 ? * 6#3 *)", None).unwrap_err().contains("not read"));
        assert!(parse("at(2026-11-27T08:45:00)", Some("Europe/Paris")).unwrap_err().contains("Europe/Paris"));
        assert!(parse("cron(0 8 * *)", None).unwrap_err().contains("6 fields"));
        assert!(parse("cron(0 25 * * ? *)", None).unwrap_err().contains("outside"));
    }
}
