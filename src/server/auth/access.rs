//! Who may reach which route, declared where the route is declared.
//!
//! - The JSON API, the probes and the sign-in flow are added through
//!   `Routes`, whose only way to add a route takes its `Access`.
//! - The pages' access sits beside their `<Route>`s (`app::PAGES`), each
//!   server function's beside it (`access!` in `app/data.rs`); `Routes::leptos`
//!   adds the routes Leptos generates and looks each one up there.
//!
//! `Routes` yields the axum router and the `RouteTable` of every route it
//! holds. `guard` reads the table by the route the request matched (axum's
//! `MatchedPath`: the guard runs after routing), and the role matrix test
//! walks it. A route the table does not know (added around `Routes`, or a
//! page or server function declared with nothing) is refused to everyone.
//!
//! What matches no route is a static file, public by where it is served
//! from (the site root: the pkg dir and the assets dir's copy), or else
//! the 404 page, which needs a sign-in.

use crate::model::Access;
use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodRouter, Route};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use tower::{Layer, Service};

/// Paths whose answers are JSON, errors included (a scraper of `/metrics`
/// gets a 401 with a JSON body, not the sign-in page).
pub fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// One route as the router holds it, and who may reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// `None`: any method.
    pub method: Option<Method>,
    /// The route's pattern, as axum's `MatchedPath` names it.
    pub path: String,
    /// `None`: declared with nothing, so refused to everyone.
    pub access: Option<Access>,
}

/// What the guard learns of a routed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Declared(Access),
    /// A route nobody declared an access for: refused to everyone.
    Undeclared,
    /// The path is declared, for these methods only (a 405).
    WrongMethod(Vec<Method>),
}

/// The methods of one path (`None`: any) with their access (`None`:
/// declared with nothing).
type Methods = Vec<(Option<Method>, Option<Access>)>;

/// Every route of the router with its access, and where static files are.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: BTreeMap<String, Methods>,
    static_root: Option<PathBuf>,
}

impl RouteTable {
    /// Every route, in path order.
    pub fn routes(&self) -> Vec<Declared> {
        self.routes
            .iter()
            .flat_map(|(path, methods)| {
                methods.iter().map(|(method, access)| Declared {
                    method: method.clone(),
                    path: path.clone(),
                    access: *access,
                })
            })
            .collect()
    }

    /// The access of `method` on the route `matched` (a pattern). HEAD is
    /// answered by a GET route, as axum does.
    pub fn lookup(&self, method: &Method, matched: &str) -> Lookup {
        let Some(methods) = self.routes.get(matched) else { return Lookup::Undeclared };
        let found = |wanted: &Method| methods.iter().find(|(m, _)| m.as_ref().is_none_or(|m| m == wanted));
        let entry = found(method).or_else(|| (*method == Method::HEAD).then(|| found(&Method::GET)).flatten());
        match entry {
            Some((_, Some(access))) => Lookup::Declared(*access),
            Some((_, None)) => Lookup::Undeclared,
            None => Lookup::WrongMethod(methods.iter().filter_map(|(m, _)| m.clone()).collect()),
        }
    }

    /// Whether a request that matched no route asks for a static file: a
    /// GET or HEAD of a file under the site root, named by plain segments
    /// (nothing hidden, nothing percent-encoded: never `..`).
    pub async fn serves_file(&self, method: &Method, path: &str) -> bool {
        let Some(root) = &self.static_root else { return false };
        let Some(relative) = path.strip_prefix('/') else { return false };
        let plain = |segment: &str| {
            !segment.is_empty()
                && !segment.starts_with('.')
                && segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        matches!(*method, Method::GET | Method::HEAD)
            && relative.split('/').all(plain)
            && tokio::fs::metadata(root.join(relative)).await.is_ok_and(|m| m.is_file())
    }

    fn declare(&mut self, method: Option<Method>, path: &str, access: Option<Access>) {
        let methods = self.routes.entry(path.to_string()).or_default();
        let overlaps = methods.iter().any(|(m, _)| m.is_none() || method.is_none() || *m == method);
        assert!(!overlaps, "{path} {method:?} is declared twice");
        methods.push((method, access));
    }

    fn merge(&mut self, other: RouteTable) {
        for (path, methods) in other.routes {
            for (method, access) in methods {
                self.declare(method, &path, access);
            }
        }
        self.static_root = self.static_root.take().or(other.static_root);
    }
}

/// An axum router that can only be given a route with its access:
/// `.get("/api/orders/{order_id}", Access::Needs(Permission::ViewOrders), order)`.
/// Without one, a route does not compile: the access is an argument of every
/// way in,
///
/// ```compile_fail,E0061
/// # use northwind_ops::server::auth::access::Routes;
/// async fn order() {}
/// let _ = Routes::<()>::new().get("/api/orders/{order_id}", order);
/// ```
///
/// and there is no way in without it:
///
/// ```compile_fail,E0599
/// # use northwind_ops::server::auth::access::Routes;
/// async fn order() {}
/// let _ = Routes::<()>::new().route("/api/orders/{order_id}", axum::routing::get(order));
/// ```
pub struct Routes<S = ()> {
    router: Router<S>,
    table: RouteTable,
}

impl<S: Clone + Send + Sync + 'static> Default for Routes<S> {
    fn default() -> Self {
        Self { router: Router::new(), table: RouteTable::default() }
    }
}

impl<S: Clone + Send + Sync + 'static> Routes<S> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get<H: Handler<T, S>, T: 'static>(self, path: &str, access: Access, handler: H) -> Self {
        self.add(Some(Method::GET), path, access, axum::routing::get(handler))
    }

    pub fn post<H: Handler<T, S>, T: 'static>(self, path: &str, access: Access, handler: H) -> Self {
        self.add(Some(Method::POST), path, access, axum::routing::post(handler))
    }

    pub fn put<H: Handler<T, S>, T: 'static>(self, path: &str, access: Access, handler: H) -> Self {
        self.add(Some(Method::PUT), path, access, axum::routing::put(handler))
    }

    pub fn delete<H: Handler<T, S>, T: 'static>(self, path: &str, access: Access, handler: H) -> Self {
        self.add(Some(Method::DELETE), path, access, axum::routing::delete(handler))
    }

    /// Every method (a catch-all that answers 404, say).
    pub fn any<H: Handler<T, S>, T: 'static>(self, path: &str, access: Access, handler: H) -> Self {
        self.add(None, path, access, axum::routing::any(handler))
    }

    fn add(mut self, method: Option<Method>, path: &str, access: Access, route: MethodRouter<S>) -> Self {
        self.table.declare(method, path, Some(access));
        self.router = self.router.route(path, route);
        self
    }

    pub fn merge(mut self, other: Routes<S>) -> Self {
        self.table.merge(other.table);
        self.router = self.router.merge(other.router);
        self
    }

    /// A layer for every route so far (and the fallback), as `Router::layer`.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<axum::extract::Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<axum::extract::Request>>::Response: axum::response::IntoResponse + 'static,
        <L::Service as Service<axum::extract::Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<axum::extract::Request>>::Future: Send + 'static,
    {
        self.router = self.router.layer(layer);
        self
    }

    /// A layer for the routes so far only, as `Router::route_layer`.
    pub fn route_layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<axum::extract::Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<axum::extract::Request>>::Response: axum::response::IntoResponse + 'static,
        <L::Service as Service<axum::extract::Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<axum::extract::Request>>::Future: Send + 'static,
    {
        self.router = self.router.route_layer(layer);
        self
    }

    /// The Leptos pages of `listing` and every registered server function,
    /// each with the access declared for it: `pages` (the table beside the
    /// `<Route>`s, in their `path!` spelling) and the server functions'
    /// `access!` declarations. One declared with nothing is added anyway
    /// (Leptos adds every route it knows) and refused to everyone.
    pub fn leptos<IV: leptos::prelude::IntoView + 'static>(
        mut self,
        state: &S,
        listing: Vec<leptos_axum::AxumRouteListing>,
        pages: &[(&str, Access)],
        context: impl Fn() + 'static + Clone + Send + Sync,
        app: impl Fn() -> IV + Clone + Send + Sync + 'static,
    ) -> Self
    where
        leptos::prelude::LeptosOptions: axum::extract::FromRef<S>,
    {
        use leptos_axum::LeptosRoutes;
        for page in &listing {
            let access = pages.iter().find(|(path, _)| axum_pattern(path) == page.path()).map(|(_, access)| *access);
            for method in page.methods() {
                self.table.declare(Some(leptos_method(method)), page.path(), access);
            }
        }
        for (path, method) in leptos::server_fn::axum::server_fn_paths() {
            self.table.declare(Some(method), path, server_function_access(path));
        }
        self.router = self.router.leptos_routes_with_context(state, listing, context, app);
        self
    }

    /// What matches no route: a file of `site_root` if there is one (public
    /// by where it is), else what `fallback` answers, for signed-in users.
    pub fn static_files<H: Handler<T, S>, T: 'static>(mut self, site_root: &str, fallback: H) -> Self {
        self.table.static_root = Some(PathBuf::from(site_root));
        self.router = self.router.fallback(fallback);
        self
    }

    /// The router, and the table of its routes.
    pub fn into_parts(self) -> (Router<S>, RouteTable) {
        (self.router, self.table)
    }
}

/// A page's path as `path!` spells it (`/orders/:id`), as axum does
/// (`/orders/{id}`).
fn axum_pattern(leptos: &str) -> String {
    let segments = leptos.split('/').map(|segment| {
        if let Some(name) = segment.strip_prefix(':') {
            format!("{{{name}}}")
        } else if let Some(name) = segment.strip_prefix('*') {
            format!("{{*{name}}}")
        } else {
            segment.to_string()
        }
    });
    segments.collect::<Vec<_>>().join("/")
}

fn leptos_method(method: leptos_router::Method) -> Method {
    match method {
        leptos_router::Method::Get => Method::GET,
        leptos_router::Method::Post => Method::POST,
        leptos_router::Method::Put => Method::PUT,
        leptos_router::Method::Delete => Method::DELETE,
        leptos_router::Method::Patch => Method::PATCH,
    }
}

/// One server function's access, declared beside it with `access!` (in
/// `app/data.rs`) and collected when the process starts.
#[derive(Debug)]
pub struct ServerFnAccess {
    /// `<F as ServerFn>::PATH`: the route Leptos adds for it.
    pub path: &'static str,
    pub access: Access,
}

inventory::collect!(ServerFnAccess);

/// The access declared for the server function at `path`, if any.
pub fn server_function_access(path: &str) -> Option<Access> {
    let mut declared = inventory::iter::<ServerFnAccess>.into_iter().filter(|d| d.path == path);
    let first = declared.next()?;
    // Two declarations for one function: neither is trusted.
    declared.next().is_none().then_some(first.access)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Permission;

    async fn nothing() {}

    #[test]
    fn the_table_names_each_method_of_a_route() {
        let admin = Access::Needs(Permission::Administer);
        let (_, table) = Routes::<()>::new()
            .get("/api/tokens", admin, nothing)
            .post("/api/tokens", admin, nothing)
            .get("/healthz", Access::Open, nothing)
            .any("/api/{*rest}", Access::SignedIn, nothing)
            .into_parts();
        assert_eq!(table.lookup(&Method::GET, "/api/tokens"), Lookup::Declared(admin));
        assert_eq!(table.lookup(&Method::HEAD, "/healthz"), Lookup::Declared(Access::Open));
        assert_eq!(table.lookup(&Method::DELETE, "/api/tokens"), Lookup::WrongMethod(vec![Method::GET, Method::POST]));
        assert_eq!(table.lookup(&Method::PUT, "/api/{*rest}"), Lookup::Declared(Access::SignedIn));
        assert_eq!(table.lookup(&Method::GET, "/api/added-around-the-table"), Lookup::Undeclared);
        assert_eq!(table.routes().len(), 4);
    }

    #[test]
    #[should_panic(expected = "declared twice")]
    fn a_route_declared_twice_is_refused_at_start() {
        let _ = Routes::<()>::new().get("/x", Access::Open, nothing).get("/x", Access::SignedIn, nothing);
    }

    #[test]
    fn page_paths_are_spelt_as_axum_spells_them() {
        assert_eq!(axum_pattern("/orders/:id"), "/orders/{id}");
        assert_eq!(axum_pattern("/files/*rest"), "/files/{*rest}");
        assert_eq!(axum_pattern("/"), "/");
    }

    #[tokio::test]
    async fn static_files_are_files_of_the_site_root_by_plain_names() {
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(dir.join("favicon.svg"), "<svg/>").unwrap();
        std::fs::write(dir.join("pkg/app.wasm"), "").unwrap();
        let table = RouteTable { static_root: Some(dir.clone()), ..RouteTable::default() };
        assert!(table.serves_file(&Method::GET, "/favicon.svg").await);
        assert!(table.serves_file(&Method::HEAD, "/pkg/app.wasm").await);
        for (method, path) in [
            (Method::POST, "/favicon.svg"),
            (Method::GET, "/pkg"),
            (Method::GET, "/pkg/"),
            (Method::GET, "/nothing.svg"),
            (Method::GET, "/pkg/../favicon.svg"),
            (Method::GET, "/pkg/%2e%2e/favicon.svg"),
            (Method::GET, "//favicon.svg"),
            (Method::GET, "/"),
        ] {
            assert!(!table.serves_file(&method, path).await, "{method} {path}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("northwind-static-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
