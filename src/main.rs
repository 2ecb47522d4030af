// The server renders pages with many small allocations; glibc's malloc and
// free took a fifth of its time under 50 viewers (BENCHMARKS.md's reading).
#[cfg(feature = "ssr")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "ssr")]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    northwind_ops::server::cli::main().await
}

#[cfg(not(feature = "ssr"))]
fn main() {
    // The browser build is the library's `hydrate`; this binary needs `ssr`.
}
