//! `provision`, `seed` and `template`: the tables, demo data, and the
//! deployment as code.

use super::CliError;
use super::users::api_error;
use crate::model::{Role, iso_millis};
use crate::server::auth::accounts;
use crate::server::cli::config::{ProvisionArgs, SeedArgs, StoreConfig};
use crate::server::cli::seed::{SeedPlan, seed};
use crate::server::store::Store;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub(super) fn run_template(config: &StoreConfig, args: &ProvisionArgs) -> Result<(), CliError> {
    use crate::server::deploy::template::{Deployment, template};
    use crate::server::store::TableDef;
    // The same checks as a store's: the names must be DynamoDB's.
    config.validate().map_err(CliError::Usage)?;
    let capacity = args.capacity();
    let deployment = Deployment {
        orders: TableDef::orders(&config.orders_table, capacity),
        metrics: TableDef::metrics(&config.metrics_table, capacity),
    };
    println!("{:#}", template(&deployment));
    Ok(())
}

pub(super) async fn run_provision(store: &Store, args: &ProvisionArgs) -> Result<(), CliError> {
    let report = store.provision(Some(args.capacity())).await?;
    println!("{report}");
    Ok(())
}

pub(super) async fn run_seed(store: &Store, args: &SeedArgs, data_dir: &std::path::Path) -> Result<(), CliError> {
    let now = match args.now.as_deref() {
        Some(text) => iso_millis::parse(text).map_err(|e| CliError::Usage(format!("--now: {e}")))?,
        None => chrono::Utc::now(),
    };
    store.provision(Some(args.provision.capacity())).await?;
    let plan = SeedPlan {
        orders: args.orders,
        customers: args.customers,
        days: args.days,
        seed: args.seed,
        now,
        writer: args.writer,
    };
    let report = seed(store, &plan).await?;
    println!(
        "seeded {} orders ({} written, {} already there); {} of today's are PENDING",
        args.orders, report.written, report.already_there, report.pending_today
    );
    if args.demo_accounts {
        demo_accounts(store, data_dir).await?;
    }
    Ok(())
}

/// One account per role, made only when there is none yet, with generated
/// passwords: printed, and kept in a file only this user can read.
pub(super) async fn demo_accounts(store: &Store, data_dir: &std::path::Path) -> Result<(), CliError> {
    let path = data_dir.join("demo-credentials.txt");
    if !store.list_accounts().await?.is_empty() {
        println!("accounts exist already; demo credentials, if these are the demo's, are in {}", path.display());
        return Ok(());
    }
    let mut lines = Vec::new();
    for role in Role::ALL {
        let password = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 12]>());
        accounts::add_user(store, role.as_str(), role, password.clone()).await.map_err(api_error)?;
        lines.push(format!("{role:<8} {:<8} {password}", role.as_str()));
    }
    let text =
        format!("# role    name     password (demo accounts made by `seed --demo-accounts`)\n{}\n", lines.join("\n"));
    crate::server::fs::create_private_dir(data_dir)
        .and_then(|()| crate::server::fs::write_private(&path, &text))
        .map_err(|source| CliError::Io { what: format!("writing {}", path.display()), source })?;
    println!("demo accounts (also in {}, readable by you only):\n{text}", path.display());
    Ok(())
}
