//! What clients send, as it arrives, and why a value is refused.

use super::*;

/// Query parameters of the PENDING list, as they arrive: parsed and checked
/// on the server, so every bad value gets a message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema, utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct PendingParams {
    /// Newest day, `YYYY-MM-DD` (UTC); today when absent.
    pub date: Option<String>,
    /// How many days back from `date` to include, 1 to 31.
    #[cfg_attr(feature = "ssr", param(value_type = Option<u32>, minimum = 1, maximum = 31))]
    pub days: Option<String>,
    /// Orders on a page, 1 to 100 (25 when absent).
    #[cfg_attr(feature = "ssr", param(value_type = Option<u32>, minimum = 1, maximum = 100))]
    pub limit: Option<String>,
    /// Where the page starts: the `next` of the page before, with the same filters.
    pub cursor: Option<String>,
    /// `1`: only orders PENDING longer than the stuck threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<String>,
    /// A two-letter shipping country, e.g. `NO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The smallest order total, in the currency's units (e.g. `150` or `150.50`).
    #[serde(default, rename = "minTotal", skip_serializing_if = "Option::is_none")]
    pub min_total: Option<String>,
    /// One customer's orders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer: Option<String>,
}

/// An amount in a currency's units (`150`, `150.5`, `150.50`) as minor units
/// (cents), or `None` if it is not one. Whole numbers only, no floats: the
/// server's filter and the page's live filter read `minTotal` alike, and
/// the browser's bundle carries no float parser for it.
pub fn parse_amount(text: &str) -> Option<i64> {
    let (units, cents) = text.split_once('.').unwrap_or((text, "0"));
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|c| c.is_ascii_digit());
    if !digits(units) || !digits(cents) || cents.len() > 2 {
        return None;
    }
    let units: i64 = units.parse().ok()?;
    let cents: i64 = cents.parse::<i64>().ok()? * if cents.len() == 1 { 10 } else { 1 };
    units.checked_mul(100)?.checked_add(cents)
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct PageParams {
    /// Orders on a page, 1 to 100 (25 when absent).
    #[cfg_attr(feature = "ssr", param(value_type = Option<u32>, minimum = 1, maximum = 100))]
    pub limit: Option<String>,
    /// Where the page starts: the `next` of the page before.
    pub cursor: Option<String>,
}
/// Why a value a client sent is refused: one variant per rule, so a
/// caller can tell them apart and each message is written once. Every
/// variant names the field it is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("{field} is empty")]
    Empty { field: &'static str },
    #[error("{field} is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} {value:?} has the character {bad:?}: only letters, digits, '-' and '_' are allowed")]
    IdCharacter { field: &'static str, value: String, bad: char },
    #[error("{field} must be 1 to {max} characters")]
    TextLength { field: &'static str, max: usize },
    /// Control and direction-override characters can make a page lie about
    /// what it shows (reverse an order id, say).
    #[error("{field} has the character U+{code:04X}: control and text-direction characters are not allowed")]
    Character { field: &'static str, code: u32 },
    #[error(
        "{field} {value:?} must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    Name { field: &'static str, value: String },
    #[error("token name {0:?} may not contain '.'")]
    TokenName(String),
    #[error("a password needs at least {0} characters")]
    ShortPassword(usize),
    /// No sign-in form can type one: a line break or tab from a pasted or
    /// piped text would make an account nobody can use.
    #[error("a password cannot hold control characters: character {at} is {what}; give the password alone on one line")]
    PasswordControl { at: usize, what: String },
    #[error("a new order starts PENDING, not {0}")]
    NotPending(Status),
    #[error("{0}")]
    Timestamp(String),
    #[error("createdAt {0} is in the future")]
    Future(String),
    #[error("createdAt {at} is more than {days} day in the past")]
    TooOld { at: String, days: i64 },
    #[error("currency {0:?} is not a three-letter code such as USD")]
    Currency(String),
    #[error("an order has 1 to {0} line items")]
    ItemCount(usize),
    #[error("quantity of {sku} must be 1 to {max}")]
    Quantity { sku: String, max: u32 },
    #[error("unitPrice of {0} is negative")]
    NegativePrice(String),
    #[error("the order total is too large")]
    TotalTooLarge,
}

/// Checks an order or customer id: 1 to 64 letters, digits, `-` or `_`.
/// Anything else (in particular `#`, the key separator) never reaches a query.
pub fn validate_id(field: &'static str, id: &str) -> Result<(), Invalid> {
    if id.is_empty() {
        return Err(Invalid::Empty { field });
    }
    if id.len() > MAX_ID_LEN {
        return Err(Invalid::TooLong { field, max: MAX_ID_LEN });
    }
    if let Some(bad) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(Invalid::IdCharacter { field, value: id.to_string(), bad });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_amount;

    #[test]
    fn amounts_are_read_in_minor_units_without_floats() {
        assert_eq!(parse_amount("150"), Some(15_000));
        assert_eq!(parse_amount("150.5"), Some(15_050));
        assert_eq!(parse_amount("150.50"), Some(15_050));
        assert_eq!(parse_amount("0.07"), Some(7));
        for bad in ["", "-1", "+1", "1.234", "1,5", "abc", ".5", "5.", " 5", "1e3", "99999999999999999999"] {
            assert_eq!(parse_amount(bad), None, "{bad}");
        }
    }
}
