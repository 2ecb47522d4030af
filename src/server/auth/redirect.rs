//! Where a `next` sends the browser after signing in (or out): read as a
//! browser reads a `Location`, and followed only when it stays on this site.
//!
//! Browsers parse URLs by the WHATWG URL standard, which the `url` crate
//! implements: tabs and line breaks are dropped anywhere, a backslash is a
//! slash, `https:evil.example` and `//evil.example` name another host. So a
//! string test (starts with `/`, not `//`) is not enough: `/\t/evil.example`
//! passes one and is `//evil.example` to the browser. Here `next` is resolved
//! against this site's own origin exactly as a browser would, and followed
//! only when the result is on that origin and the text holds no control
//! character; anything else goes to `/`.

use url::{Position, Url};

/// This site's origin (the public URL's scheme, host and port), against
/// which every redirect target is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home(Url);

impl Home {
    /// `public_url`: where browsers reach the app (`--public-url`, else the
    /// bound address); only its origin counts.
    pub fn new(public_url: &str) -> Result<Home, String> {
        let url = Url::parse(public_url).map_err(|e| format!("the public URL {public_url:?} is not a URL: {e}"))?;
        if !url.origin().is_tuple() {
            return Err(format!("the public URL {public_url:?} has no origin a browser could stay on"));
        }
        let mut origin = url;
        origin.set_path("/");
        origin.set_query(None);
        origin.set_fragment(None);
        Ok(Home(origin))
    }

    /// The path (with query and fragment) to send the browser to for `next`,
    /// or `/` when `next` would leave this site, holds a control character,
    /// or does not read back as itself.
    pub fn target(&self, next: &str) -> String {
        self.resolve(next).unwrap_or_else(|| "/".to_string())
    }

    fn resolve(&self, next: &str) -> Option<String> {
        // A browser drops tabs and line breaks; a header cannot carry them
        // safely; no honest link holds them.
        if next.chars().any(char::is_control) {
            return None;
        }
        let url = self.0.join(next).ok()?;
        if url.origin() != self.0.origin() {
            return None;
        }
        // Sent as a path: it reads the same behind a proxy that the public
        // URL does not name. A path that resolves as another host
        // (`/.//evil.example` normalises to `//evil.example`) does not read
        // back as itself, and is refused.
        let path = url[Position::BeforePath..].to_string();
        (self.0.join(&path).ok()? == url).then_some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> Home {
        Home::new("http://127.0.0.1:3000").unwrap()
    }

    #[test]
    fn paths_on_this_site_are_kept_with_their_query() {
        let home = home();
        for (next, want) in [
            ("/orders/o-1?x=1&y=2", "/orders/o-1?x=1&y=2"),
            ("/?limit=50", "/?limit=50"),
            ("/customers/c-1#top", "/customers/c-1#top"),
            ("http://127.0.0.1:3000/audit?date=2026-01-02", "/audit?date=2026-01-02"),
            // Percent-encoded bytes are a path's own: no browser decodes them into slashes.
            ("/%09/evil.example", "/%09/evil.example"),
            ("/%0d%0a/evil.example", "/%0d%0a/evil.example"),
            ("/search?q=a b", "/search?q=a%20b"),
            ("", "/"),
        ] {
            assert_eq!(home.target(next), want, "{next:?}");
        }
    }

    #[test]
    fn anything_a_browser_reads_as_another_site_goes_home() {
        let home = home();
        for next in [
            "//evil.example",
            "/\t/evil.example",
            "\t//evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/\\/evil.example",
            "/\\evil.example",
            "\\\\evil.example",
            " //evil.example",
            "https:evil.example",
            "https://evil.example/x",
            "http://127.0.0.1:3001/",
            "https://127.0.0.1:3000/",
            "javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "/.//evil.example",
            "/x/..//evil.example",
            "/\u{0}/x",
            "/\u{7f}/x",
            "/\u{85}/x",
        ] {
            assert_eq!(home.target(next), "/", "{next:?}");
        }
    }

    #[test]
    fn the_origin_is_the_public_urls() {
        let home = Home::new("https://ops.example.com/some/path?x=1").unwrap();
        assert_eq!(home.target("https://ops.example.com/orders/o-1"), "/orders/o-1");
        assert_eq!(home.target("http://ops.example.com/orders/o-1"), "/");
        assert!(Home::new("not a url").is_err());
        assert!(Home::new("data:text/plain,x").is_err());
    }
}
