//! Who the client is on the network: the TCP peer, or, when the peer is one
//! of `--trusted-proxies`, the address its `X-Forwarded-For` names.
//!
//! Each proxy appends the address it received the request from to
//! `X-Forwarded-For`; everything to the left of what our own proxies wrote
//! is the client's to invent. So the list is read from the right, skipping
//! our proxies, and the first address that is not one of them is the client.
//! From any other peer the header is ignored: anyone can send it.
//!
//! `ClientAddr` is the one answer every limit, the logs and the audit use:
//! `client_addr` (middleware, outermost but for the metrics) puts it in every
//! request's extensions, and handlers take it as an extractor.

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

const FORWARDED_FOR: &str = "x-forwarded-for";
const FORWARDED_PROTO: &str = "x-forwarded-proto";

/// The proxies (load balancers) whose `X-Forwarded-*` headers are believed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Arc<Vec<IpNet>>);

impl TrustedProxies {
    pub fn new(ranges: Vec<IpNet>) -> Self {
        Self(Arc::new(ranges))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|range| range.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `--trusted-proxies`: ranges or addresses, comma-separated; blank
    /// entries (an empty list) are none.
    pub fn parse(text: &str) -> Result<TrustedProxies, String> {
        let ranges = text.split(',').filter(|e| !e.trim().is_empty()).map(parse_range);
        Ok(Self::new(ranges.collect::<Result<_, _>>()?))
    }
}

impl std::fmt::Display for TrustedProxies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranges: Vec<String> = self.0.iter().map(IpNet::to_string).collect();
        f.write_str(&ranges.join(","))
    }
}

/// One `--trusted-proxies` entry: a CIDR range (`10.0.0.0/16`, `fd00::/8`),
/// or one address, which stands for itself alone.
pub fn parse_range(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    text.parse::<IpNet>()
        .map(|net| net.trunc())
        .map_err(|_| format!("{text:?} is not a CIDR range (like 10.0.0.0/16 or fd00::/8) or an IP address"))
}

/// The client's address, as the trusted proxies tell it (or the peer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientAddr(pub IpAddr);

impl ClientAddr {
    pub fn ip(self) -> IpAddr {
        self.0
    }

    /// The address `client_addr` found for this request; the TCP peer when
    /// the middleware did not run (a router served without it).
    pub fn of(extensions: &axum::http::Extensions) -> Option<ClientAddr> {
        extensions
            .get::<ClientAddr>()
            .copied()
            .or_else(|| extensions.get::<ConnectInfo<SocketAddr>>().map(|c| ClientAddr(c.0.ip().to_canonical())))
    }
}

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Handlers take the client's address. Without one (a router served with
/// no connection info, as some tests do) every such request shares the
/// unspecified address: one key for all, never a fresh one each.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr::of(&parts.extensions).unwrap_or(ClientAddr(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))))
    }
}

/// The scheme the client used, as a trusted proxy reports it
/// (`X-Forwarded-Proto`); absent when the peer is not trusted or said
/// nothing usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardedProto {
    Http,
    Https,
}

impl ForwardedProto {
    pub fn scheme(self) -> &'static str {
        match self {
            ForwardedProto::Http => "http",
            ForwardedProto::Https => "https",
        }
    }
}

/// The client behind `peer`: the rightmost `X-Forwarded-For` address that is
/// not a trusted proxy, when `peer` is one; else `peer`.
///
/// Read right to left, an entry that is not an address (garbage, or a proxy
/// misconfigured) stops the walk: the client is then the nearest hop known,
/// never something further left that the client may have written. When
/// every entry is a trusted proxy, the leftmost is the client (a request from
/// inside the trusted network).
pub fn client_of(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(peer) {
        return peer;
    }
    let mut client = peer;
    for entry in forwarded_for(headers).rev() {
        match parse_hop(entry) {
            Some(hop) if trusted.contains(hop) => client = hop,
            Some(hop) => return hop,
            None => return client,
        }
    }
    client
}

/// The scheme a trusted proxy says the client used: the last value it gave.
pub fn proto_of(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> Option<ForwardedProto> {
    if !trusted.contains(peer) {
        return None;
    }
    let last =
        headers.get_all(FORWARDED_PROTO).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).last()?;
    match last.trim().to_ascii_lowercase().as_str() {
        "https" => Some(ForwardedProto::Https),
        "http" => Some(ForwardedProto::Http),
        _ => None,
    }
}

/// Every `X-Forwarded-For` entry in order, over all the header's lines
/// (joined as one list, as RFC 9110 reads a repeated header); blank ones
/// dropped. A line that is not text counts as one unreadable entry.
fn forwarded_for(headers: &HeaderMap) -> impl DoubleEndedIterator<Item = &str> {
    headers
        .get_all(FORWARDED_FOR)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect::<Vec<_>>()
        .into_iter()
}

/// One hop: an address, possibly with a port (`1.2.3.4:5678`, `[::1]:80`).
fn parse_hop(entry: &str) -> Option<IpAddr> {
    let ip = entry.parse::<IpAddr>().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))?;
    Some(ip.to_canonical())
}

/// Puts the request's `ClientAddr` (and a trusted `ForwardedProto`) in its
/// extensions, for every layer and handler inside.
pub async fn client_addr(trusted: TrustedProxies, mut request: Request, next: Next) -> Response {
    if let Some(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip()) {
        let client = ClientAddr(client_of(peer, request.headers(), &trusted));
        let proto = proto_of(peer, request.headers(), &trusted);
        request.extensions_mut().insert(client);
        if let Some(proto) = proto {
            request.extensions_mut().insert(proto);
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(ranges: &[&str]) -> TrustedProxies {
        TrustedProxies::new(ranges.iter().map(|r| parse_range(r).unwrap()).collect())
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(FORWARDED_FOR, value.parse().unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    const ALB: &str = "10.0.3.7";

    #[test]
    fn the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy() {
        let vpc = trusted(&["10.0.0.0/16"]);
        assert_eq!(client_of(ip(ALB), &xff(&["203.0.113.9"]), &vpc), ip("203.0.113.9"));
        // Two of our proxies in a row (a CDN's edge inside the range too).
        assert_eq!(client_of(ip(ALB), &xff(&["203.0.113.9, 10.0.9.1"]), &vpc), ip("203.0.113.9"));
        // Over two header lines: one list.
        assert_eq!(client_of(ip(ALB), &xff(&["203.0.113.9", "10.0.9.1"]), &vpc), ip("203.0.113.9"));
        // No header from a trusted peer: the peer itself.
        assert_eq!(client_of(ip(ALB), &HeaderMap::new(), &vpc), ip(ALB));
    }

    #[test]
    fn addresses_the_client_prepends_change_nothing() {
        let vpc = trusted(&["10.0.0.0/16"]);
        for spoofed in ["1.1.1.1", "10.0.0.1", "1.1.1.1, 2.2.2.2", "garbage", "::1"] {
            let headers = xff(&[&format!("{spoofed}, 203.0.113.9")]);
            assert_eq!(client_of(ip(ALB), &headers, &vpc), ip("203.0.113.9"), "{spoofed}");
        }
    }

    #[test]
    fn the_header_is_ignored_from_a_peer_that_is_not_trusted() {
        let headers = xff(&["1.1.1.1"]);
        assert_eq!(client_of(ip("203.0.113.9"), &headers, &trusted(&["10.0.0.0/16"])), ip("203.0.113.9"));
        assert_eq!(client_of(ip("127.0.0.1"), &headers, &TrustedProxies::default()), ip("127.0.0.1"));
        assert_eq!(proto_of(ip("203.0.113.9"), &proto(&["https"]), &trusted(&["10.0.0.0/16"])), None);
    }

    #[test]
    fn ipv6_and_ipv4_mapped_peers_are_matched() {
        let v6 = trusted(&["fd00::/8"]);
        assert_eq!(client_of(ip("fd00::1"), &xff(&["2001:db8::7"]), &v6), ip("2001:db8::7"));
        assert_eq!(client_of(ip("fd00::1"), &xff(&["[2001:db8::7]:4431"]), &v6), ip("2001:db8::7"));
        // A dual-stack socket sees an IPv4 balancer as ::ffff:10.0.3.7.
        let vpc = trusted(&["10.0.0.0/16"]);
        assert_eq!(client_of(ip("::ffff:10.0.3.7"), &xff(&["203.0.113.9:5000"]), &vpc), ip("203.0.113.9"));
        assert_eq!(client_of(ip("::ffff:203.0.113.9"), &xff(&["1.1.1.1"]), &vpc), ip("203.0.113.9"));
    }

    #[test]
    fn an_all_trusted_chain_names_its_leftmost_hop() {
        let vpc = trusted(&["10.0.0.0/16"]);
        assert_eq!(client_of(ip(ALB), &xff(&["10.0.1.5, 10.0.2.6"]), &vpc), ip("10.0.1.5"));
    }

    #[test]
    fn an_unreadable_entry_stops_at_the_nearest_known_hop() {
        let vpc = trusted(&["10.0.0.0/16"]);
        assert_eq!(client_of(ip(ALB), &xff(&["203.0.113.9, nonsense"]), &vpc), ip(ALB));
        assert_eq!(client_of(ip(ALB), &xff(&["203.0.113.9, unknown, 10.0.9.1"]), &vpc), ip("10.0.9.1"));
        assert_eq!(client_of(ip(ALB), &xff(&[" , 203.0.113.9 ,"]), &vpc), ip("203.0.113.9"), "blanks dropped");
    }

    fn proto(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(FORWARDED_PROTO, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_forwarded_scheme_is_the_trusted_proxys_last_word() {
        let vpc = trusted(&["10.0.0.0/16"]);
        assert_eq!(proto_of(ip(ALB), &proto(&["https"]), &vpc), Some(ForwardedProto::Https));
        assert_eq!(proto_of(ip(ALB), &proto(&["https, HTTP"]), &vpc), Some(ForwardedProto::Http));
        assert_eq!(proto_of(ip(ALB), &proto(&["gopher"]), &vpc), None);
        assert_eq!(proto_of(ip(ALB), &HeaderMap::new(), &vpc), None);
    }

    #[test]
    fn ranges_are_cidrs_or_single_addresses_and_garbage_is_named() {
        assert_eq!(parse_range(" 10.0.0.0/16 ").unwrap().to_string(), "10.0.0.0/16");
        assert_eq!(parse_range("10.0.3.7/16").unwrap().to_string(), "10.0.0.0/16", "host bits dropped");
        assert_eq!(parse_range("127.0.0.1").unwrap().to_string(), "127.0.0.1/32");
        assert_eq!(parse_range("fd00::/8").unwrap().to_string(), "fd00::/8");
        for bad in ["", "10.0.0.0/33", "10.0.0/16", "alb.internal", "10.0.0.0/-1"] {
            let err = parse_range(bad).unwrap_err();
            assert!(err.contains("CIDR"), "{bad}: {err}");
        }
    }
}
