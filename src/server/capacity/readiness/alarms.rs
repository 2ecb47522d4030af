//! `alarms`: the CloudWatch alarms on the tables (AWS only).

use super::{Inputs, check, figure, fix_text};
use crate::model::{Fix, ReadinessCheck, Verdict};
use crate::server::store::Alarm;

pub(super) fn alarms_check(inputs: &Inputs<'_>) -> ReadinessCheck {
    const ID: &str = "alarms";
    const TITLE: &str = "Alarms";
    if !inputs.on_aws {
        let reason = "not applicable: a local engine has no CloudWatch alarms".to_string();
        return check(ID, TITLE, Verdict::Ready, reason, vec![figure("alarms", "not applicable")], None);
    }
    let Some(alarms) = inputs.alarms else {
        let reason = "unknown: this server reads CloudWatch only with --capacity-source cloudwatch".to_string();
        let fix = Fix {
            text: "run serve (or this command) with --capacity-source cloudwatch, or list them yourself".into(),
            command: Some(format!("aws cloudwatch describe-alarms --alarm-name-prefix {}", inputs.orders_table)),
            parameter: None,
            action: None,
        };
        return check(ID, TITLE, Verdict::Act, reason, vec![figure("alarms", "unknown (not read)")], Some(fix));
    };
    let firing: Vec<&Alarm> = alarms.iter().filter(|a| a.state == "ALARM").collect();
    let mut figures = vec![figure("alarms on the tables", alarms.len().to_string())];
    figures.extend(firing.iter().map(|a| figure(a.name.clone(), a.state.clone())));
    if alarms.is_empty() {
        let reason = "no CloudWatch alarm watches the tables".to_string();
        let fix = Fix {
            text: "deploy the stack's template, which has alarms per table and index".into(),
            command: Some("northwind-ops template > template.json".into()),
            parameter: None,
            action: None,
        };
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(fix));
    }
    if !firing.is_empty() {
        let names = firing.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
        let reason = format!("{} alarm(s) firing now: {names}", firing.len());
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(fix_text("find and clear why before the sale")));
    }
    let reason = format!("{} alarms watch the tables, none firing", alarms.len());
    check(ID, TITLE, Verdict::Ready, reason, figures, None)
}

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, settings, verdict_of};
    use super::*;

    #[test]
    fn alarms_are_not_applicable_locally_and_read_on_aws() {
        let local = Case::new(100.0, Some(10)).assess();
        assert_eq!(verdict_of(&local, "alarms"), Verdict::Ready);
        let mut aws = Case::new(100.0, Some(10));
        aws.on_aws = true;
        aws.throughput = settings(Some(100_000));
        assert_eq!(verdict_of(&aws.assess(), "alarms"), Verdict::Act, "no alarm at all");
        aws.alarms = vec![Alarm { name: "orders-throttles".into(), state: "OK".into() }];
        assert_eq!(aws.assess().verdict, Verdict::Ready);
        aws.alarms[0].state = "ALARM".into();
        assert_eq!(verdict_of(&aws.assess(), "alarms"), Verdict::Act);
    }
}
