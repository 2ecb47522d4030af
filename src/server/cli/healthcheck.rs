//! `healthcheck`: asks a `serve` whether it is up, for container hosts that
//! run a command to know (an ECS container health check): the image is
//! built FROM scratch and has no shell or curl to do it. Exit 0 on a 200,
//! non-zero with a line that names the problem otherwise. It needs no store
//! and no secrets.

use clap::Args;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Where `serve` listens when nothing says otherwise (the image's
/// LEPTOS_SITE_ADDR, cargo-leptos's site address).
const DEFAULT_PORT: u16 = 3000;
/// The most of an unexpected answer's body an error quotes.
const BODY_QUOTE: usize = 200;

#[derive(Args, Debug, Clone)]
pub struct HealthcheckArgs {
    /// The URL to ask [default: this host's serve, http://127.0.0.1:<port>/healthz, the port from
    /// NORTHWIND_ADDR, else LEPTOS_SITE_ADDR, else 3000]
    #[arg(long)]
    pub url: Option<String>,
    /// Seconds to wait for the whole answer
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub timeout_secs: u64,
}

/// Why the check failed, in words a container host's log shows.
#[derive(Debug, thiserror::Error)]
pub enum HealthcheckError {
    #[error("--url {url}: {why}")]
    BadUrl { url: String, why: String },
    #[error("{url}: nothing answers there ({detail})")]
    Unreachable { url: String, detail: String },
    #[error("{url}: no answer within {seconds} s")]
    TimedOut { url: String, seconds: u64 },
    #[error("{url} answered {status}, not 200: {body}")]
    Unhealthy { url: String, status: u16, body: String },
}

/// The default URL: `serve`'s address as its own settings give it, asked
/// on loopback when it listens on every interface.
pub fn default_url(env: impl Fn(&str) -> Option<String>) -> String {
    let addr = ["NORTHWIND_ADDR", "LEPTOS_SITE_ADDR"]
        .into_iter()
        .find_map(|name| env(name).and_then(|value| value.trim().parse::<SocketAddr>().ok()));
    let (host, port) = match addr {
        Some(addr) if !addr.ip().is_unspecified() => (addr.ip(), addr.port()),
        Some(addr) => (std::net::Ipv4Addr::LOCALHOST.into(), addr.port()),
        None => (std::net::Ipv4Addr::LOCALHOST.into(), DEFAULT_PORT),
    };
    format!("http://{}/healthz", SocketAddr::new(host, port))
}

/// The command: one question, its answer printed.
pub(super) async fn run(args: &HealthcheckArgs) -> Result<(), super::CliError> {
    println!("{}", check(args).await?);
    Ok(())
}

/// Asks once; `Ok` with what to print on a 200.
pub async fn check(args: &HealthcheckArgs) -> Result<String, HealthcheckError> {
    let url = args.url.clone().unwrap_or_else(|| default_url(|name| std::env::var(name).ok()));
    let parsed =
        reqwest::Url::parse(&url).map_err(|e| HealthcheckError::BadUrl { url: url.clone(), why: e.to_string() })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(HealthcheckError::BadUrl { url, why: "only http and https URLs are checked".into() });
    }
    let timeout = Duration::from_secs(args.timeout_secs);
    // No proxy from the environment and no redirects: the check is of this
    // address and nothing it points elsewhere.
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| HealthcheckError::BadUrl { url: url.clone(), why: e.to_string() })?;
    let started = Instant::now();
    let failed = |err: reqwest::Error| {
        if err.is_timeout() {
            HealthcheckError::TimedOut { url: url.clone(), seconds: args.timeout_secs }
        } else {
            HealthcheckError::Unreachable { url: url.clone(), detail: innermost(&err) }
        }
    };
    let response = client.get(parsed).send().await.map_err(failed)?;
    let status = response.status();
    let body = response.text().await.map_err(failed)?;
    if status != reqwest::StatusCode::OK {
        let mut body = body.trim().to_string();
        if body.len() > BODY_QUOTE {
            let mut cut = BODY_QUOTE;
            while !body.is_char_boundary(cut) {
                cut -= 1;
            }
            body.truncate(cut);
            body.push('…');
        }
        return Err(HealthcheckError::Unhealthy { url, status: status.as_u16(), body });
    }
    Ok(format!("ok: {url} answered 200 in {} ms", started.elapsed().as_millis()))
}

/// The deepest cause: "Connection refused (os error 111)" rather than
/// reqwest's "error sending request".
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_default_url_is_serves_own_address_on_loopback() {
        assert_eq!(default_url(env(&[])), "http://127.0.0.1:3000/healthz");
        assert_eq!(default_url(env(&[("LEPTOS_SITE_ADDR", "0.0.0.0:3000")])), "http://127.0.0.1:3000/healthz");
        assert_eq!(
            default_url(env(&[("NORTHWIND_ADDR", "0.0.0.0:8080"), ("LEPTOS_SITE_ADDR", "0.0.0.0:3000")])),
            "http://127.0.0.1:8080/healthz",
            "serve's own flag wins"
        );
        assert_eq!(default_url(env(&[("NORTHWIND_ADDR", "10.0.0.5:3000")])), "http://10.0.0.5:3000/healthz");
        assert_eq!(default_url(env(&[("NORTHWIND_ADDR", "[::]:3000")])), "http://127.0.0.1:3000/healthz");
        assert_eq!(default_url(env(&[("NORTHWIND_ADDR", "nonsense")])), "http://127.0.0.1:3000/healthz");
    }

    #[tokio::test]
    async fn a_bad_url_is_named() {
        for url in ["not a url", "ftp://127.0.0.1/healthz"] {
            let args = HealthcheckArgs { url: Some(url.into()), timeout_secs: 1 };
            let err = check(&args).await.unwrap_err();
            assert!(matches!(err, HealthcheckError::BadUrl { .. }), "{err}");
            assert!(err.to_string().contains(url), "{err}");
        }
    }
}
