//! The commands and template parameters the checks hand out: a plan name
//! as a shell word, `aws dynamodb update-table`, and Application Auto
//! Scaling's scalable targets and scheduled actions (what the auto scaling
//! check gathers in `ScalingFixes`).

use super::{FLOOR_LEAD_MINUTES, Inputs, num};
use crate::model::{Fix, SalePlan};
use crate::server::capacity::schedule;
use crate::server::deploy::template::{self, Setting};
use crate::server::store::usage::ReadWrite;
use chrono::Duration;

/// A plan name as one shell word.
pub(super) fn shell_quote(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        name.to_string()
    } else {
        format!("'{}'", name.replace('\'', "'\\''"))
    }
}

/// The `aws dynamodb update-table` that sets `field.key` on a table or index.
pub(super) fn update_table(
    inputs: &Inputs<'_>,
    resource: &str,
    index: Option<&str>,
    field: &str,
    key: &str,
    value: f64,
) -> String {
    let table = resource.split('/').next().unwrap_or(inputs.orders_table);
    let value = num(value.ceil());
    let option = field.chars().fold(String::new(), |mut out, c| {
        if c.is_ascii_uppercase() && !out.is_empty() {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
        out
    });
    match index {
        None => format!("aws dynamodb update-table --table-name {table} --{option} {key}={value}"),
        Some(index) => format!(
            "aws dynamodb update-table --table-name {table} --global-secondary-index-updates \
             '[{{\"Update\":{{\"IndexName\":\"{index}\",\"{field}\":{{\"{key}\":{value}}}}}}}]'"
        ),
    }
}

/// A name as a scheduled action's: letters, digits, `-`, `_` and `.`.
fn action_name(plan: &str, resource: &str, what: &str) -> String {
    let slug = |text: &str| -> String {
        text.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect()
    };
    format!("sale-{}-{}-{what}", slug(plan), slug(resource))
}

fn put_scheduled_action(resource_id: &str, dimension: &str, name: &str, schedule: &str, min: f64) -> String {
    format!(
        "aws application-autoscaling put-scheduled-action --service-namespace dynamodb --resource-id {resource_id} \
         --scalable-dimension {dimension} --scheduled-action-name {name} --schedule '{schedule}' --timezone Etc/UTC \
         --scalable-target-action MinCapacity={}",
        num(min.ceil())
    )
}

fn register_scalable_target(resource_id: &str, dimension: &str, min: Option<f64>, max: f64) -> String {
    let min = min.map_or(String::new(), |m| format!(" --min-capacity {}", num(m.ceil())));
    format!(
        "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id {resource_id} \
         --scalable-dimension {dimension}{min} --max-capacity {}",
        num(max.ceil())
    )
}

pub(super) fn describe_targets_fix() -> Fix {
    Fix {
        text: "grant the server's role application-autoscaling:DescribeScalableTargets and \
               application-autoscaling:DescribeScheduledActions (docs/iam/serve.json), or list them yourself"
            .into(),
        command: Some("aws application-autoscaling describe-scalable-targets --service-namespace dynamodb".into()),
        parameter: None,
        action: None,
    }
}

/// What the auto scaling check found wrong, and how to put it right.
#[derive(Default)]
pub(super) struct ScalingFixes {
    pub(super) reasons: Vec<String>,
    pub(super) parameters: Vec<String>,
    pub(super) commands: Vec<String>,
    /// Whether a maximum is to be raised, and a floor scheduled.
    pub(super) max: bool,
    pub(super) floor: bool,
}

/// A provisioned table or index as its fixes name it: in the readiness
/// figures, to Application Auto Scaling, and in the template.
pub(super) struct Named<'a> {
    pub(super) resource: &'a str,
    pub(super) resource_id: &'a str,
    pub(super) dimension: &'a str,
    pub(super) prefix: &'a str,
}

impl ScalingFixes {
    /// Auto scaling's maximum at twice the peak (as the warm check's
    /// `…WriteMax`); registering a new target sets its minimum too.
    pub(super) fn raise_max(&mut self, named: &Named<'_>, needed: f64, min: Option<f64>) {
        let max = needed * 2.0;
        self.max = true;
        self.parameters.push(format!(
            "{}={}",
            template::parameter(named.prefix, Setting::Max, ReadWrite::Write),
            num(max)
        ));
        self.commands.push(register_scalable_target(named.resource_id, named.dimension, min, max));
    }

    /// The floor raised to the peak `FLOOR_LEAD_MINUTES` before the start
    /// and set back to `restore` at the end: the two scheduled actions, and
    /// the template's batch floor with its (shared) schedules.
    pub(super) fn raise_floor(&mut self, plan: &SalePlan, named: &Named<'_>, needed: f64, restore: f64) {
        let (raise, lower) =
            (schedule::at(plan.start - Duration::minutes(FLOOR_LEAD_MINUTES)), schedule::at(plan.end()));
        let name = |what| action_name(&plan.name, named.resource, what);
        self.commands.push(put_scheduled_action(named.resource_id, named.dimension, &name("raise"), &raise, needed));
        self.commands.push(put_scheduled_action(named.resource_id, named.dimension, &name("lower"), &lower, restore));
        let batch_min = template::parameter(named.prefix, Setting::BatchMin, ReadWrite::Write);
        self.parameters.push(format!("{batch_min}={}", num(needed)));
        if !self.floor {
            self.parameters.push(format!("'{}={raise}'", template::BATCH_RAISE_SCHEDULE));
            self.parameters.push(format!("'{}={lower}'", template::BATCH_LOWER_SCHEDULE));
        }
        self.floor = true;
    }
}
