//! The readiness check's auto scaling figures from a real Application Auto
//! Scaling API (moto's), for provisioned tables on both engines: the tables
//! live in the engine, their scalable targets and scheduled actions in
//! moto, and the store reads each from its own endpoint
//! (`--autoscaling-endpoint-url`). A maximum under the peak is an action
//! naming the parameter and the command, and registering it again higher
//! turns it ready; a floor raise scheduled before the start is found, and
//! none gives the `put-scheduled-action` command.

use crate::common::moto::Moto;
use crate::common::{TestApp, engines};
use aws_sdk_applicationautoscaling::types::{ScalableDimension, ScalableTargetAction, ServiceNamespace};
use chrono::{Duration, Utc};
use northwind_ops::model::{Actor, ReadinessCheck, Role, SalePlanInput, Verdict};
use northwind_ops::server::auth::Principal;
use northwind_ops::server::store::TableCapacity;
use northwind_ops::server::store::autoscaling::write_target;
use serde_json::json;

fn ops() -> Principal {
    Principal { actor: Actor::cli("autoscaling-test"), role: Role::Ops, client: None }
}

/// The write targets of the app's four tables and indexes.
fn resources(app: &TestApp) -> Vec<(String, String)> {
    let (orders, metrics) = (&app.config.orders_table, &app.config.metrics_table);
    vec![
        write_target(orders, None),
        write_target(orders, Some("GSI1")),
        write_target(orders, Some("GSI2")),
        write_target(metrics, None),
    ]
}

async fn register(client: &aws_sdk_applicationautoscaling::Client, app: &TestApp, min: i32, max: i32) {
    for (resource_id, dimension) in resources(app) {
        client
            .register_scalable_target()
            .service_namespace(ServiceNamespace::Dynamodb)
            .resource_id(resource_id)
            .scalable_dimension(ScalableDimension::from(dimension.as_str()))
            .min_capacity(min)
            .max_capacity(max)
            .send()
            .await
            .unwrap();
    }
}

async fn scaling_check(app: &TestApp) -> ReadinessCheck {
    let readiness = app.service.readiness(Some("launch")).await.unwrap();
    readiness.checks.into_iter().find(|c| c.id == "auto-scaling").expect("an auto-scaling check")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_scaling_maximum_and_scheduled_floor_are_read_from_the_api() {
    let moto = Moto::start().await;
    let client = moto.autoscaling();
    let day = Utc::now().date_naive() + Duration::days(1);
    let start = format!("{day}T09:00:00Z");
    for engine in engines() {
        let app =
            TestApp::spawn_unprovisioned(engine.clone(), &["--autoscaling-endpoint-url", moto.url.as_str()]).await;
        app.store.provision(Some(TableCapacity::Provisioned { read: 5, write: 5 })).await.unwrap();
        let input: SalePlanInput = serde_json::from_value(json!({
            "name": "launch", "peakOrdersPerSecond": 200, "start": start,
            "rampMinutes": 10, "holdMinutes": 30, "decayMinutes": 20, "itemBytes": 700
        }))
        .unwrap();
        app.service.create_sale_plan(&input, &ops()).await.unwrap();
        let orders = app.config.orders_table.clone();

        // No scalable target yet: the capacity is fixed at 5, under the peak.
        let check = scaling_check(&app).await;
        assert_eq!(check.verdict, Verdict::Act, "{engine:?}: {check:#?}");
        assert!(
            check.figures.iter().any(|f| f.label == format!("{orders}: scalable target")
                && f.value == "none: the capacity is fixed at 5 write units"),
            "{engine:?}: {check:#?}"
        );

        // Targets with a maximum of 10, and no floor raise: both named.
        register(&client, &app, 5, 10).await;
        let check = scaling_check(&app).await;
        assert_eq!(check.verdict, Verdict::Act, "{engine:?}: {check:#?}");
        assert!(
            check.reason.contains(&format!("{orders}'s auto scaling maximum is 10, under the peak's")),
            "{}",
            check.reason
        );
        assert!(
            check.reason.contains(&format!("no scheduled action raises {orders}'s minimum (5)")),
            "{}",
            check.reason
        );
        let fix = check.fix.clone().unwrap();
        let command = fix.command.unwrap();
        assert!(
            command.contains(&format!(
                "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id \
                 table/{orders}/index/GSI2 --scalable-dimension dynamodb:index:WriteCapacityUnits --max-capacity "
            )),
            "{command}"
        );
        assert!(
            command.contains(&format!(
                "put-scheduled-action --service-namespace dynamodb --resource-id table/{orders} --scalable-dimension \
                 dynamodb:table:WriteCapacityUnits --scheduled-action-name sale-launch-{orders}-raise --schedule \
                 'at({day}T08:45:00)'"
            )),
            "{command}"
        );
        let parameter = fix.parameter.unwrap();
        assert!(parameter.contains("OrdersWriteMax=") && parameter.contains("OrdersGSI2WriteBatchMin="), "{parameter}");

        // A floor raise scheduled half an hour before the start is found.
        let raise_at = format!("at({day}T08:30:00)");
        for (resource_id, dimension) in resources(&app) {
            client
                .put_scheduled_action()
                .service_namespace(ServiceNamespace::Dynamodb)
                .scheduled_action_name("launch-raise")
                .resource_id(resource_id)
                .scalable_dimension(ScalableDimension::from(dimension.as_str()))
                .schedule(&raise_at)
                .timezone("Etc/UTC")
                .scalable_target_action(ScalableTargetAction::builder().min_capacity(100_000).build())
                .send()
                .await
                .unwrap();
        }
        let check = scaling_check(&app).await;
        assert_eq!(check.verdict, Verdict::Act, "the maximum is still 10: {check:#?}");
        assert!(!check.reason.contains("no scheduled action"), "{engine:?}: {}", check.reason);
        let floor = check
            .figures
            .iter()
            .find(|f| f.label.starts_with(&format!("{orders}/GSI2: auto scaling minimum")))
            .unwrap_or_else(|| panic!("{check:#?}"));
        assert_eq!(floor.value, format!("100000 (set by scheduled action launch-raise at {day} 08:30 UTC)"));

        // Registered again with a maximum over the peak: ready.
        register(&client, &app, 5, 100_000).await;
        let check = scaling_check(&app).await;
        assert_eq!(check.verdict, Verdict::Ready, "{engine:?}: {check:#?}");
        assert!(check.fix.is_none());
        assert!(
            check
                .figures
                .iter()
                .any(|f| f.label == format!("{orders}: auto scaling maximum") && f.value == "100000 (now)"),
            "{check:#?}"
        );
    }
}
