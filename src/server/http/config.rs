//! The server's settings: what `serve` listens on, the limits it holds every
//! client to, sign-in, and what else runs beside it (flattened into the
//! command line by `cli::config`).

use crate::server::auth::client::TrustedProxies;
use crate::server::auth::oidc::{
    CALLBACK_PATH, DEFAULT_ROLE_MAP, DEFAULT_ROLES_CLAIM, DEFAULT_SCOPES, OidcSettings, RoleMap, parse_scopes,
};
use crate::server::store::config::ProvisionArgs;
use clap::{Args, Parser};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address the web app listens on [default: LEPTOS_SITE_ADDR as
    /// cargo-leptos sets it, else 127.0.0.1:3000]. The built site (wasm, JS,
    /// CSS) is read from LEPTOS_SITE_ROOT [default: target/site].
    #[arg(long, env = "NORTHWIND_ADDR")]
    pub addr: Option<SocketAddr>,

    /// PENDING orders older than this many minutes are flagged as stuck
    #[arg(long, env = "NORTHWIND_STUCK_AFTER_MINUTES", default_value_t = 30)]
    pub stuck_after_minutes: u32,

    /// Minutes between reconciliations of today's PENDING counters (0: never)
    #[arg(long, env = "NORTHWIND_RECONCILE_MINUTES", default_value_t = 10)]
    pub reconcile_minutes: u32,

    /// How often each day an open dashboard watches is checked for changes
    /// other instances applied, in milliseconds: one strongly consistent
    /// read of a small item per watched day each time. Lower is fresher and
    /// reads more
    #[arg(long, env = "NORTHWIND_FOLLOW_EVERY_MS",
          default_value_t = crate::server::service::follower::FOLLOW_EVERY.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(100..=10_000))]
    pub follow_every_ms: u64,

    /// Do not run the stream consumer in this process (run `consume` elsewhere)
    #[arg(long, env = "NORTHWIND_NO_CONSUMER")]
    pub no_consumer: bool,

    /// A JSON file of prices for the capacity page's advisor, overriding the
    /// us-east-1 defaults (as `advise --prices`)
    #[arg(long, env = "NORTHWIND_PRICES_FILE")]
    pub prices: Option<PathBuf>,

    /// The concurrency the Lambda consumer may use (its reserved concurrency,
    /// or the account's unreserved pool), for the Sales readiness: its
    /// mapping runs up to open shards × ParallelizationFactor invocations at
    /// once [default: unknown; an account's default pool of 1000 is assumed]
    #[arg(long, env = "NORTHWIND_CONSUMER_CONCURRENCY")]
    pub consumer_concurrency: Option<u32>,

    /// Create the tables when they are missing (needs dynamodb:CreateTable);
    /// without it, serve only checks them
    #[arg(long, env = "NORTHWIND_PROVISION")]
    pub provision: bool,

    #[command(flatten)]
    pub billing: ProvisionArgs,

    #[command(flatten)]
    pub limits: Limits,

    #[command(flatten)]
    pub auth: AuthArgs,

    #[command(flatten)]
    pub oidc: OidcArgs,
}

/// Sign-in and what a browser may send.
#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// The address users reach the app at (behind a proxy, its https URL);
    /// the OpenID redirect and the cookies' Secure flag follow from it
    /// [default: http://<--addr>]
    #[arg(long, env = "NORTHWIND_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Host names the app answers to, comma-separated; any other `Host` is
    /// refused (DNS rebinding) [default: localhost, 127.0.0.1, ::1, the
    /// bound address and the public URL's host]
    #[arg(long, env = "NORTHWIND_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Minutes a session lasts without a request
    #[arg(long, env = "NORTHWIND_SESSION_IDLE_MINUTES", default_value_t = 480,
          value_parser = clap::value_parser!(u64).range(1..=10_080))]
    pub session_idle_minutes: u64,

    /// Hours a session lasts at most, however busy
    #[arg(long, env = "NORTHWIND_SESSION_MAX_HOURS", default_value_t = 24,
          value_parser = clap::value_parser!(u64).range(1..=720))]
    pub session_max_hours: u64,

    /// The proxies (load balancers) in front of the app, as CIDR ranges or
    /// addresses, comma-separated: from these peers, the client is the
    /// rightmost `X-Forwarded-For` address that is not one of them, and
    /// `X-Forwarded-Proto` is believed; from any other peer both headers are
    /// ignored. Behind an ALB, the VPC's range. Empty: the TCP peer is the
    /// client
    #[arg(long, env = "NORTHWIND_TRUSTED_PROXIES", value_name = "CIDR,...",
          value_parser = TrustedProxies::parse)]
    pub trusted_proxies: Option<TrustedProxies>,

    /// Password sign-in attempts per minute from one client address
    #[arg(long, env = "NORTHWIND_SIGN_IN_ATTEMPTS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sign_in_attempts: u32,

    /// Password sign-ins against one account name, from addresses it was
    /// never signed in from, before each further attempt waits: 1 s, then
    /// twice as long each time, up to --sign-in-delay-max-secs. Forgotten
    /// after 15 minutes without an attempt, or at a sign-in
    #[arg(long, env = "NORTHWIND_SIGN_IN_ACCOUNT_ATTEMPTS", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub sign_in_account_attempts: u32,

    /// The longest wait between password sign-ins against one account, in
    /// seconds: the delay grows to this and stops (never a lockout)
    #[arg(long, env = "NORTHWIND_SIGN_IN_DELAY_MAX_SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub sign_in_delay_max_secs: u64,
}

impl AuthArgs {
    /// None unless given (an empty list, as an empty environment variable
    /// gives, is none too).
    pub fn trusted_proxies(&self) -> TrustedProxies {
        self.trusted_proxies.clone().unwrap_or_default()
    }

    /// The public URL, given or derived from the bound address.
    pub fn public_url(&self, bound: SocketAddr) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{bound}")).trim_end_matches('/').to_string()
    }

    /// Cookies go over HTTPS only, unless the app is served over plain HTTP
    /// on loopback (where a browser would not send a Secure cookie back).
    pub fn secure_cookies(&self, bound: SocketAddr) -> bool {
        let url = self.public_url(bound);
        let plain_loopback = url.starts_with("http://")
            && ["http://127.", "http://localhost", "http://[::1]"].iter().any(|p| url.starts_with(p));
        !plain_loopback
    }

    pub fn allowed_hosts(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect();
        }
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
        if !bound.ip().is_unspecified() {
            hosts.push(bound.ip().to_string());
        }
        let public = self.public_url(bound);
        if let Some(host) = public.split_once("://").and_then(|(_, rest)| rest.split(['/', ':']).next()) {
            hosts.push(host.to_ascii_lowercase());
        }
        hosts.dedup();
        hosts
    }
}

impl Default for ServeArgs {
    /// The defaults as clap states them (the environment's twins included).
    fn default() -> Self {
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            args: ServeArgs,
        }
        Defaults::parse_from(["serve"]).args
    }
}

/// Sign-in with OpenID Connect: off unless an issuer is given.
#[derive(Args, Debug, Clone)]
pub struct OidcArgs {
    /// Issuer URL of the OpenID Connect provider, exactly as its discovery
    /// document states it (https; plain http only on loopback). Without it
    /// there is no sign-in
    #[arg(long, env = "NORTHWIND_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// This app's client id at the provider
    #[arg(long, env = "NORTHWIND_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// File holding the client secret. The secret may instead come from
    /// NORTHWIND_OIDC_CLIENT_SECRET; never from the command line, where other
    /// users can read it
    #[arg(long, env = "NORTHWIND_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// ID token claim holding the user's groups (an array of strings, or one
    /// string)
    #[arg(long, env = "NORTHWIND_OIDC_ROLES_CLAIM", default_value = DEFAULT_ROLES_CLAIM)]
    pub oidc_roles_claim: String,

    /// Which groups grant which role: comma-separated role=group pairs
    /// (roles: viewer, support, ops, admin; several groups may grant one
    /// role; a user gets the highest role of their groups)
    #[arg(long, env = "NORTHWIND_OIDC_ROLE_MAP", default_value = DEFAULT_ROLE_MAP)]
    pub oidc_role_map: RoleMap,

    /// Scopes to ask the provider for, space-separated (openid is always
    /// asked for)
    #[arg(long, env = "NORTHWIND_OIDC_SCOPES", default_value = DEFAULT_SCOPES)]
    pub oidc_scopes: String,
}

impl OidcArgs {
    /// The settings for `Oidc::discover`, or `None` when no issuer is set
    /// (no sign-in). `public_url` is where browsers reach this app; the
    /// redirect URL is `<public_url>/auth/callback`. The client secret comes
    /// from NORTHWIND_OIDC_CLIENT_SECRET or `--oidc-client-secret-file`.
    pub fn settings(&self, public_url: &str) -> Result<Option<OidcSettings>, String> {
        let secret_from_env = std::env::var("NORTHWIND_OIDC_CLIENT_SECRET").ok().filter(|s| !s.is_empty());
        self.settings_with(public_url, secret_from_env)
    }

    /// `settings`, with the environment's secret passed in (tests cannot set
    /// variables safely while other tests run).
    fn settings_with(&self, public_url: &str, secret_from_env: Option<String>) -> Result<Option<OidcSettings>, String> {
        let given = |value: &Option<String>| value.clone().filter(|v| !v.trim().is_empty());
        let Some(issuer) = given(&self.oidc_issuer) else {
            if given(&self.oidc_client_id).is_some()
                || self.oidc_client_secret_file.is_some()
                || secret_from_env.is_some()
            {
                return Err("the OpenID Connect client id and secret need --oidc-issuer".into());
            }
            return Ok(None);
        };
        let client_id = given(&self.oidc_client_id).ok_or("--oidc-issuer needs --oidc-client-id")?;
        let client_secret = match (&self.oidc_client_secret_file, secret_from_env) {
            (Some(_), Some(_)) => {
                return Err("set the OpenID Connect client secret once: NORTHWIND_OIDC_CLIENT_SECRET or \
                     --oidc-client-secret-file, not both"
                    .into());
            }
            (Some(path), None) => std::fs::read_to_string(path)
                .map_err(|e| format!("--oidc-client-secret-file {}: {e}", path.display()))?
                .trim()
                .to_string(),
            (None, Some(secret)) => secret,
            (None, None) => {
                return Err("--oidc-issuer needs the client secret: set NORTHWIND_OIDC_CLIENT_SECRET or \
                     --oidc-client-secret-file"
                    .into());
            }
        };
        if client_secret.is_empty() {
            return Err("the OpenID Connect client secret is empty".into());
        }
        if self.oidc_roles_claim.trim().is_empty() {
            return Err("--oidc-roles-claim is empty".into());
        }
        Ok(Some(OidcSettings {
            issuer,
            client_id,
            client_secret,
            redirect_url: format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')),
            roles_claim: self.oidc_roles_claim.trim().to_string(),
            role_map: self.oidc_role_map.clone(),
            scopes: parse_scopes(&self.oidc_scopes),
        }))
    }
}

/// What one client, and all of them, may take of a server.
#[derive(Args, Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Longest a request may take before it is answered 503 (the live
    /// stream excepted), in seconds
    #[arg(long, env = "NORTHWIND_REQUEST_TIMEOUT_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub request_timeout_secs: u64,

    /// Longest a client may take to send a request's headers, in seconds
    #[arg(long, env = "NORTHWIND_HEADER_TIMEOUT_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub header_timeout_secs: u64,

    /// Longest a keep-alive connection may sit idle between requests, in
    /// seconds. Behind a load balancer, keep it above the balancer's own
    /// idle timeout (an ALB's is 60 s), so the balancer closes first
    #[arg(long, env = "NORTHWIND_IDLE_TIMEOUT_SECS", default_value_t = 75,
          value_parser = clap::value_parser!(u64).range(1..=4_000))]
    pub idle_timeout_secs: u64,

    /// Largest request body accepted, in bytes
    #[arg(long, env = "NORTHWIND_MAX_BODY_BYTES", default_value_t = 65_536,
          value_parser = clap::value_parser!(u64).range(1024..=16_777_216))]
    pub max_body_bytes: u64,

    /// Connections open at once; more are closed as they arrive
    #[arg(long, env = "NORTHWIND_MAX_CONNECTIONS", default_value_t = 8_192,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,

    /// Live streams open at once, in total
    #[arg(long, env = "NORTHWIND_MAX_LIVE", default_value_t = 4_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_live: u64,

    /// Live streams open at once from one client address
    #[arg(long, env = "NORTHWIND_MAX_LIVE_PER_CLIENT", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_live_per_client: u64,

    /// Minutes a live stream lasts before the browser is asked to reconnect
    #[arg(long, env = "NORTHWIND_LIVE_MAX_MINUTES", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub live_max_minutes: u64,

    /// API requests per second one client (its API token, else its address)
    /// may make, on average (0: no limit)
    #[arg(long, env = "NORTHWIND_API_RATE", default_value_t = 50)]
    pub api_rate: u32,

    /// API requests one client (its API token, else its address) may make
    /// in a burst
    #[arg(long, env = "NORTHWIND_API_BURST", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub api_burst: u32,
}

impl Limits {
    pub fn header_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.header_timeout_secs)
    }

    pub fn idle_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.idle_timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn try_serve(extra: &[&str]) -> Result<ServeArgs, clap::Error> {
        Serve::try_parse_from(std::iter::once("serve").chain(extra.iter().copied())).map(|s| s.args)
    }

    fn oidc_args(extra: &[&str]) -> OidcArgs {
        try_serve(extra).expect("flags parse").oidc
    }

    const ISSUER: [&str; 4] = ["--oidc-issuer", "https://id.example.test", "--oidc-client-id", "northwind-ops"];

    #[test]
    fn the_follower_looks_twice_a_second_unless_told_and_within_bounds() {
        assert_eq!(try_serve(&[]).unwrap().follow_every_ms, 500);
        assert_eq!(try_serve(&["--follow-every-ms", "250"]).unwrap().follow_every_ms, 250);
        for bad in ["0", "99", "10001", "soon"] {
            let err = try_serve(&["--follow-every-ms", bad]).unwrap_err().to_string();
            assert!(err.contains("--follow-every-ms"), "{bad}: {err}");
        }
    }

    #[test]
    fn trusted_proxies_are_none_unless_given_and_a_bad_range_names_the_flag() {
        assert!(try_serve(&[]).unwrap().auth.trusted_proxies().is_empty());
        assert!(try_serve(&["--trusted-proxies", ""]).unwrap().auth.trusted_proxies().is_empty());
        let args = try_serve(&["--trusted-proxies", "10.0.0.0/16, fd00::/8,127.0.0.1,"]).unwrap();
        assert_eq!(args.auth.trusted_proxies().to_string(), "10.0.0.0/16,fd00::/8,127.0.0.1/32");
        assert!(args.auth.trusted_proxies().contains("10.0.200.1".parse().unwrap()));
        for bad in ["10.0.0.0/40", "10.0.0.0/16,alb", "*"] {
            let err = try_serve(&["--trusted-proxies", bad]).unwrap_err().to_string();
            assert!(err.contains("--trusted-proxies") && err.contains("CIDR"), "{bad}: {err}");
        }
    }

    #[test]
    fn sign_in_is_off_without_an_issuer() {
        assert!(oidc_args(&[]).settings_with("http://127.0.0.1:3000", None).unwrap().is_none());
        let err = oidc_args(&["--oidc-client-id", "x"]).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("--oidc-issuer"), "{err}");
        let err = oidc_args(&[]).settings_with("http://h", Some("secret".into())).unwrap_err();
        assert!(err.contains("--oidc-issuer"), "{err}");
    }

    #[test]
    fn oidc_settings_come_with_their_defaults() {
        let settings = oidc_args(&ISSUER).settings_with("https://ops.example.test/", Some("s3cret".into())).unwrap();
        let settings = settings.expect("sign-in is on");
        assert_eq!(settings.issuer, "https://id.example.test");
        assert_eq!(settings.client_id, "northwind-ops");
        assert_eq!(settings.client_secret, "s3cret");
        assert_eq!(settings.redirect_url, "https://ops.example.test/auth/callback");
        assert_eq!(settings.roles_claim, "groups");
        assert_eq!(settings.role_map, RoleMap::default());
        assert_eq!(settings.scopes, ["openid", "profile", "email", "groups"]);
    }

    #[test]
    fn the_oidc_client_secret_comes_from_a_file_or_the_environment_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oidc-secret");
        std::fs::write(&path, "from-file\n").unwrap();
        let mut argv = ISSUER.to_vec();
        argv.extend(["--oidc-client-secret-file", path.to_str().unwrap()]);
        let settings = oidc_args(&argv).settings_with("http://h", None).unwrap().unwrap();
        assert_eq!(settings.client_secret, "from-file");
        let err = oidc_args(&argv).settings_with("http://h", Some("env".into())).unwrap_err();
        assert!(err.contains("not both"), "{err}");
        let err = oidc_args(&ISSUER).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("NORTHWIND_OIDC_CLIENT_SECRET"), "{err}");
        let err = oidc_args(&["--oidc-issuer", "https://id.example.test"]).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("--oidc-client-id"), "{err}");
    }

    #[test]
    fn the_role_map_flag_is_parsed_and_a_bad_one_named() {
        let args = oidc_args(&["--oidc-role-map", "admin=root,ops=oncall,ops=sre", "--oidc-roles-claim", "roles"]);
        assert_eq!(args.oidc_role_map.role_for(["sre"]), Some(Role::Ops));
        assert_eq!(args.oidc_roles_claim, "roles");
        let err = try_serve(&["--oidc-role-map", "ops=a,boss=b"]).expect_err("refused");
        assert!(err.to_string().contains("\"boss=b\""), "{err}");
    }
}
