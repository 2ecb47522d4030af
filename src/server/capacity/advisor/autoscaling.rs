//! DynamoDB auto scaling replayed minute by minute (the rules are in the
//! module's documentation, `super`).

use super::{MINUTES_PER_DAY, TARGET_PERCENT};

/// At or below this utilisation a minute counts towards a scale-in: 20
/// points below the target.
const SCALE_IN_PERCENT: f64 = 50.0;
const SCALE_OUT_AFTER_MINUTES: u32 = 2;
const SCALE_IN_AFTER_MINUTES: u32 = 15;
/// Decreases per UTC day allowed at any time; later ones need an hour's gap.
const FREE_DECREASES_PER_DAY: u32 = 4;
const DECREASE_GAP_MINUTES: usize = 60;

/// What auto scaling did to one side of a resource.
#[derive(Debug, Default)]
pub(super) struct Simulation {
    /// Capacity units in force during each observed minute.
    pub(super) provisioned: Vec<u32>,
    pub(super) throttled_minutes: u32,
    /// Which minutes (indexes into the series) were throttled.
    pub(super) throttled: Vec<usize>,
    /// Minutes whose end raised, or lowered, the capacity.
    pub(super) increases: Vec<usize>,
    pub(super) decreases: Vec<usize>,
}

/// The capacity that would run `units` a minute at the target utilisation.
pub(super) fn desired(units: f64) -> u32 {
    // units × 100 / (60 s × 70) is (units / 60) / 0.70 with the 0.70 kept
    // whole: 420 units a minute want exactly 10, not ceil(10.000000000000002).
    ((units * 100.0 / (60.0 * TARGET_PERCENT)).ceil() as u32).max(1)
}

/// Replay auto scaling over one side's minutes, every one observed;
/// `first_minute_of_day` places the first minute in its UTC day.
#[cfg(test)]
pub(super) fn simulate(units: &[f64], first_minute_of_day: usize) -> Simulation {
    let units: Vec<Option<f64>> = units.iter().copied().map(Some).collect();
    simulate_with(&units, first_minute_of_day, &[])
}

/// Replay auto scaling over one side's minutes (`None`: not observed,
/// skipped), never below `floor` where it is given (a scheduled minimum).
pub(super) fn simulate_with(units: &[Option<f64>], first_minute_of_day: usize, floor: &[u32]) -> Simulation {
    let mut simulation = Simulation::default();
    let floor_at = |minute: usize| floor.get(minute).copied().unwrap_or(0);
    let Some((start, first)) = units.iter().enumerate().find_map(|(m, u)| u.map(|u| (m, u))) else {
        return simulation;
    };
    let mut provisioned = desired(first).max(floor_at(start));
    let (mut above, mut below) = (0, 0);
    let mut quota = DecreaseQuota::default();
    for (minute, consumed) in units.iter().enumerate() {
        let Some(consumed) = *consumed else {
            // Unknown: no streak runs across it.
            (above, below) = (0, 0);
            continue;
        };
        provisioned = provisioned.max(floor_at(minute));
        simulation.provisioned.push(provisioned);
        let capacity = 60.0 * f64::from(provisioned);
        if consumed > capacity {
            simulation.throttled_minutes += 1;
            simulation.throttled.push(minute);
        }
        let percent = consumed * 100.0 / capacity;
        above = if percent > TARGET_PERCENT { above + 1 } else { 0 };
        below = if percent <= SCALE_IN_PERCENT { below + 1 } else { 0 };
        let want = desired(consumed);
        if above >= SCALE_OUT_AFTER_MINUTES {
            above = 0;
            if want > provisioned {
                provisioned = want;
                simulation.increases.push(minute);
            }
        } else if below >= SCALE_IN_AFTER_MINUTES && want.max(floor_at(minute + 1)) < provisioned {
            let want = want.max(floor_at(minute + 1));
            let day = (first_minute_of_day + minute) / MINUTES_PER_DAY;
            // Refused by the quota: `below` stays, so the next qualifying
            // minute tries again.
            if quota.allows(day, minute) {
                quota.record(minute);
                provisioned = want;
                simulation.decreases.push(minute);
                below = 0;
            }
        }
    }
    simulation
}

/// DynamoDB's quota on capacity decreases: 4 per UTC day at any time, then
/// one whenever the previous decrease is at least an hour old.
#[derive(Debug, Default)]
pub(super) struct DecreaseQuota {
    day: usize,
    today: u32,
    last: Option<usize>,
}

impl DecreaseQuota {
    fn allows(&mut self, day: usize, minute: usize) -> bool {
        if day != self.day {
            self.day = day;
            self.today = 0;
        }
        self.today < FREE_DECREASES_PER_DAY || self.last.is_none_or(|last| minute - last >= DECREASE_GAP_MINUTES)
    }

    fn record(&mut self, minute: usize) {
        self.today += 1;
        self.last = Some(minute);
    }
}
