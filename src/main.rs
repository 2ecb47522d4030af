#[cfg(feature = "ssr")]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    northwind_ops::server::cli::main().await
}

#[cfg(not(feature = "ssr"))]
fn main() {
    // The browser build is the library's `hydrate`; this binary needs `ssr`.
}
