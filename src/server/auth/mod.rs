//! Sign-in. `oidc` is the OpenID Connect client: it knows the provider and
//! the flow, and nothing of sessions, cookies or routes, which wire it in.

pub mod oidc;
