//! The server functions the pages call. Each is a thin wrapper over the same
//! `Service` the JSON API uses: one data path. They live under `/api/fn/`,
//! take JSON (a plain cross-site HTML form cannot post JSON), and answer
//! errors as `{"kind", "error", "requestId"}` with the API's status codes.

pub use crate::model::ErrorKind;
use crate::model::{AccountView, NewAccount, NewToken, Role, TokenView};
use crate::model::{
    AuditEntry, AuditListing, AuditParams, BulkReport, BulkRequest, CapacityReport, Dashboard, Me, Order, OrderPage,
    PageParams, PendingParams, QualityReport, Readiness, Rehearsal, Rehearsals, SaleOutcome, SalePlan, SalePlanInput,
    SearchHit, ShardsWritten, Status,
};
use leptos::prelude::*;
use leptos::server_fn::codec::{Json, JsonEncoding};
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// Declares who may call a server function, beside it: `access!(GetOrder,
/// Needs(ViewOrders))` names the type `#[server]` made of `get_order`. The
/// server's guard finds it by the function's path; a server function
/// declared with nothing is refused to everyone (see `server::auth::access`).
macro_rules! access {
    ($function:ty, $($access:tt)+) => {
        #[cfg(feature = "ssr")]
        inventory::submit! {
            crate::server::auth::access::ServerFnAccess {
                path: <$function as leptos::server_fn::ServerFn>::PATH,
                access: {
                    #[allow(unused_imports)]
                    use crate::model::{Access::*, Permission::*};
                    $($access)+
                },
            }
        }
    };
}

/// Settings the pages need, handed to them through the Leptos context by
/// the server that renders them.
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug)]
pub struct PageSettings {
    pub stuck_after_minutes: u32,
    /// Whether an identity provider is configured.
    pub single_sign_on: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct PageError {
    pub kind: ErrorKind,
    #[serde(rename = "error")]
    pub message: String,
    /// The id the server's log files the failure under.
    #[serde(default, rename = "requestId", skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl PageError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        PageError { kind, message: message.into(), request_id: request_id() }
    }
}

impl FromServerFnError for PageError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        let status = match &value {
            // In the browser: the server could not be reached at all.
            ServerFnErrorErr::Request(_) => 503,
            // On the server: arguments that do not parse are the client's
            // mistake, and a body cut off by the size limit says so.
            ServerFnErrorErr::Args(why) | ServerFnErrorErr::MissingArg(why) if why.contains("length limit") => 413,
            ServerFnErrorErr::Args(_) | ServerFnErrorErr::MissingArg(_) => 400,
            // On the server this is the arguments' JSON failing to decode; in
            // the browser, an answer that does not decode.
            ServerFnErrorErr::Deserialization(_) if cfg!(feature = "ssr") => 400,
            _ => 500,
        };
        set_status(status);
        PageError::new(ErrorKind::of_status(status), value.to_string())
    }
}

/// Pages and server functions answer with the status the API would.
fn set_status(status: u16) {
    #[cfg(feature = "ssr")]
    if let (Some(response), Ok(status)) =
        (use_context::<leptos_axum::ResponseOptions>(), http::StatusCode::from_u16(status))
    {
        response.set_status(status);
    }
    #[cfg(not(feature = "ssr"))]
    let _ = status;
}

/// The id of the request being answered (set by the server's middleware).
fn request_id() -> Option<String> {
    #[cfg(feature = "ssr")]
    {
        let parts = use_context::<http::request::Parts>()?;
        parts.headers.get(crate::server::telemetry::REQUEST_ID)?.to_str().ok().map(str::to_string)
    }
    #[cfg(not(feature = "ssr"))]
    None
}

#[cfg(feature = "ssr")]
impl From<crate::server::error::ApiError> for PageError {
    fn from(err: crate::server::error::ApiError) -> Self {
        let kind = err.kind();
        err.log();
        set_status(err.status().as_u16());
        if let (Some(response), Some(secs)) = (use_context::<leptos_axum::ResponseOptions>(), err.retry_after()) {
            response.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        PageError::new(kind, err.public_message())
    }
}

#[cfg(feature = "ssr")]
fn service() -> crate::server::service::Service {
    expect_context::<crate::server::service::Service>()
}

/// Who is asking: the guard put the principal in the request's extensions
/// (during server rendering, the page's request).
#[cfg(feature = "ssr")]
fn principal() -> Option<crate::server::auth::Principal> {
    use_context::<http::request::Parts>()?.extensions.get::<crate::server::auth::Principal>().cloned()
}

#[cfg(feature = "ssr")]
fn signed_in() -> Result<crate::server::auth::Principal, PageError> {
    principal().ok_or_else(|| crate::server::error::ApiError::Unauthorized.into())
}

/// A service call, on the heap: the futures of the store's reads are large,
/// and a resource's future is first built on a worker thread's stack, which
/// an unoptimised build would overflow.
#[cfg(feature = "ssr")]
type Boxed<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, crate::server::error::ApiError>> + Send + 'a>>;

#[cfg(feature = "ssr")]
async fn boxed<T>(call: Boxed<'_, T>) -> Result<T, PageError> {
    Ok(call.await?)
}

#[server(prefix = "/api/fn", endpoint = "dashboard", input = Json)]
pub async fn get_dashboard(params: PendingParams) -> Result<Dashboard, PageError> {
    let settings = expect_context::<PageSettings>();
    boxed(Box::pin(service().dashboard(&params, settings.stuck_after_minutes))).await
}
access!(GetDashboard, Needs(ViewOperations));

/// A day's capacity figures (`date` `YYYY-MM-DD`, today when absent).
#[server(prefix = "/api/fn", endpoint = "capacity", input = Json)]
pub async fn get_capacity(date: Option<String>) -> Result<CapacityReport, PageError> {
    boxed(Box::pin(service().capacity(date.as_deref()))).await
}
access!(GetCapacity, Needs(ViewOperations));

/// A day's data quality (`date` `YYYY-MM-DD`, today when absent).
#[server(prefix = "/api/fn", endpoint = "quality", input = Json)]
pub async fn get_quality(date: Option<String>) -> Result<QualityReport, PageError> {
    boxed(Box::pin(service().quality(date.as_deref()))).await
}
access!(GetQuality, Needs(ViewOperations));

/// The day a page shows for `date` (`YYYY-MM-DD`, today in UTC when absent).
#[server(prefix = "/api/fn", endpoint = "day", input = Json)]
pub async fn get_day(date: Option<String>) -> Result<chrono::NaiveDate, PageError> {
    Ok(service().parse_day(date.as_deref())?)
}
access!(GetDay, Needs(ViewOperations));

#[server(prefix = "/api/fn", endpoint = "order", input = Json)]
pub async fn get_order(order_id: String) -> Result<Order, PageError> {
    boxed(Box::pin(service().order(&order_id))).await
}
access!(GetOrder, Needs(ViewOrders));

#[server(prefix = "/api/fn", endpoint = "change-status", input = Json)]
pub async fn change_status(
    order_id: String,
    from: Status,
    to: Status,
    reason: Option<String>,
) -> Result<Order, PageError> {
    let by = signed_in()?;
    let change = crate::model::StatusChange { from, to, reason };
    boxed(Box::pin(service().change_status(&order_id, change, &by))).await
}
// Cancelling is the least a status change needs; the service checks the
// change asked for (`Permission::to_change_status`).
access!(ChangeStatus, Needs(CancelOrder));

/// Starts a bulk status change; the run's id.
#[server(prefix = "/api/fn", endpoint = "start-bulk", input = Json)]
pub async fn start_bulk(request: BulkRequest) -> Result<String, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().start_bulk(request, &by))).await
}
access!(StartBulk, Needs(CancelOrder));

#[server(prefix = "/api/fn", endpoint = "bulk-report", input = Json)]
pub async fn get_bulk_report(id: String) -> Result<BulkReport, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().bulk_report(&id, &by))).await
}
access!(GetBulkReport, Needs(CancelOrder));

#[server(prefix = "/api/fn", endpoint = "cancel-bulk", input = Json)]
pub async fn cancel_bulk(id: String) -> Result<BulkReport, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().cancel_bulk(&id, &by))).await
}
access!(CancelBulk, Needs(CancelOrder));

#[server(prefix = "/api/fn", endpoint = "order-history", input = Json)]
pub async fn get_order_history(order_id: String) -> Result<Vec<AuditEntry>, PageError> {
    boxed(Box::pin(service().order_history(&order_id))).await
}
access!(GetOrderHistory, Needs(ViewOrders));

#[server(prefix = "/api/fn", endpoint = "audit", input = Json)]
pub async fn get_audit(params: AuditParams) -> Result<AuditListing, PageError> {
    boxed(Box::pin(service().audit(&params))).await
}
access!(GetAudit, Needs(Administer));

/// Every account and every token (the Admin page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdminOverview {
    pub accounts: Vec<AccountView>,
    pub tokens: Vec<TokenView>,
}

#[server(prefix = "/api/fn", endpoint = "admin", input = Json)]
pub async fn get_admin() -> Result<AdminOverview, PageError> {
    let by = signed_in()?;
    let service = service();
    let accounts = boxed(Box::pin(service.accounts(&by))).await?;
    let tokens = boxed(Box::pin(service.tokens(&by))).await?;
    Ok(AdminOverview { accounts, tokens })
}
access!(GetAdmin, Needs(Administer));

#[server(prefix = "/api/fn", endpoint = "add-account", input = Json)]
pub async fn add_account(new: NewAccount) -> Result<AccountView, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().add_account(&new, &by))).await
}
access!(AddAccount, Needs(Administer));

#[server(prefix = "/api/fn", endpoint = "disable-account", input = Json)]
pub async fn disable_account(name: String) -> Result<(), PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().disable_account(&name, &by))).await
}
access!(DisableAccount, Needs(Administer));

#[server(prefix = "/api/fn", endpoint = "set-role", input = Json)]
pub async fn set_role(name: String, role: Role) -> Result<(), PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().set_role(&name, role, &by))).await
}
access!(SetRole, Needs(Administer));

/// A new token's text: shown once, on the page that made it.
#[server(prefix = "/api/fn", endpoint = "create-token", input = Json)]
pub async fn create_token(new: NewToken) -> Result<String, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().create_token(&new, &by))).await
}
access!(CreateToken, Needs(Administer));

#[server(prefix = "/api/fn", endpoint = "revoke-token", input = Json)]
pub async fn revoke_token(name: String) -> Result<(), PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().revoke_token(&name, &by))).await
}
access!(RevokeToken, Needs(Administer));

/// Who is signed in, if anyone (the header shows it; the pages offer only
/// what the role may do, and the server checks it again).
#[server(prefix = "/api/fn", endpoint = "me", input = Json)]
pub async fn get_me() -> Result<Option<Me>, PageError> {
    Ok(principal().map(|p| p.me()))
}
access!(GetMe, Public);

/// How one may sign in here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInChoices {
    /// The identity provider's sign-in, when one is configured.
    pub single_sign_on: bool,
}

#[server(prefix = "/api/fn", endpoint = "sign-in-options", input = Json)]
pub async fn sign_in_options() -> Result<SignInChoices, PageError> {
    let settings = expect_context::<PageSettings>();
    Ok(SignInChoices { single_sign_on: settings.single_sign_on })
}
access!(SignInOptions, Public);

#[server(prefix = "/api/fn", endpoint = "customer-orders", input = Json)]
pub async fn get_customer_orders(customer_id: String, params: PageParams) -> Result<OrderPage, PageError> {
    let page = boxed(Box::pin(service().customer_orders(&customer_id, &params))).await?;
    if page.orders.is_empty() && params.cursor.as_deref().is_none_or(str::is_empty) {
        let err = crate::server::error::ApiError::NotFound(format!("customer {customer_id} has no orders"));
        return Err(err.into());
    }
    Ok(page)
}
access!(GetCustomerOrders, Needs(ViewOrders));

#[server(prefix = "/api/fn", endpoint = "search", input = Json)]
pub async fn search(query: String) -> Result<SearchHit, PageError> {
    boxed(Box::pin(service().search(&query))).await
}
access!(Search, Needs(ViewOrders));

/// Every sale plan, by name.
#[server(prefix = "/api/fn", endpoint = "sale-plans", input = Json)]
pub async fn get_sale_plans() -> Result<Vec<SalePlan>, PageError> {
    boxed(Box::pin(service().sale_plans())).await
}
access!(GetSalePlans, Needs(ViewOperations));

/// A sale plan's go/no-go, each check with its figures and fix.
#[server(prefix = "/api/fn", endpoint = "readiness", input = Json)]
pub async fn get_readiness(plan: String) -> Result<Readiness, PageError> {
    boxed(Box::pin(service().readiness(Some(&plan)))).await
}
access!(GetReadiness, Needs(ViewOperations));

/// Creates a plan (`original` absent) or changes the plan named `original`.
#[server(prefix = "/api/fn", endpoint = "save-sale-plan", input = Json)]
pub async fn save_sale_plan(original: Option<String>, input: SalePlanInput) -> Result<SalePlan, PageError> {
    let by = signed_in()?;
    let service = service();
    match original {
        Some(name) => boxed(Box::pin(service.update_sale_plan(&name, &input, &by))).await,
        None => boxed(Box::pin(service.create_sale_plan(&input, &by))).await,
    }
}
access!(SaveSalePlan, Needs(PlanSales));

#[server(prefix = "/api/fn", endpoint = "delete-sale-plan", input = Json)]
pub async fn delete_sale_plan(name: String) -> Result<(), PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().delete_sale_plan(&name, &by))).await
}
access!(DeleteSalePlan, Needs(PlanSales));

/// Writes the shard count the plan's peak needs for each sale day not
/// written yet.
#[server(prefix = "/api/fn", endpoint = "write-sale-shards", input = Json)]
pub async fn write_sale_shards(name: String) -> Result<ShardsWritten, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().write_sale_shards(&name, &by))).await
}
access!(WriteSaleShards, Needs(PlanSales));

/// The plan's rehearsal running, if any, and the last two finished.
#[server(prefix = "/api/fn", endpoint = "rehearsals", input = Json)]
pub async fn get_rehearsals(name: String) -> Result<Rehearsals, PageError> {
    boxed(Box::pin(service().rehearsals(&name))).await
}
access!(GetRehearsals, Needs(ViewOperations));

/// Starts a rehearsal of the plan in the background.
#[server(prefix = "/api/fn", endpoint = "start-rehearsal", input = Json)]
pub async fn start_rehearsal(name: String) -> Result<Rehearsal, PageError> {
    let by = signed_in()?;
    boxed(Box::pin(service().start_rehearsal(&name, &by))).await
}
access!(StartRehearsal, Needs(PlanSales));

/// The plan beside what happened in its window so far.
#[server(prefix = "/api/fn", endpoint = "sale-outcome", input = Json)]
pub async fn get_sale_outcome(name: String) -> Result<SaleOutcome, PageError> {
    boxed(Box::pin(service().sale_outcome(&name))).await
}
access!(GetSaleOutcome, Needs(ViewOperations));
