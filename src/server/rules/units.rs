//! Item sizes and capacity units, as DynamoDB computes them. Pure: values
//! arrive in DynamoDB JSON (`{"S": "..."}`, `{"N": "12"}`, ...).
//!
//! The sizes follow the developer guide's "DynamoDB item sizes and formats"
//! (CapacityUnitCalculations): an attribute is the UTF-8 bytes of its name
//! plus the size of its value; a list or map adds 3 bytes, and 1 byte per
//! element. The guide calls the number rule "approximately" (1 byte per two
//! significant digits, plus 1 byte); this implements that rule as written:
//! it does not guess at a byte for the sign or the exponent.

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde_json::{Map, Value};

/// DynamoDB counts sizes in binary units ("Constraints": 1 KB = 1024 bytes).
pub const KB: u64 = 1024;
/// One write unit covers up to 1 KB written.
pub const WRITE_UNIT_BYTES: u64 = KB;
/// One read unit covers up to 4 KB read.
pub const READ_UNIT_BYTES: u64 = 4 * KB;

/// An attribute value that is not DynamoDB JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a DynamoDB attribute value: {0}")]
pub struct SizeError(pub String);

/// The size of a whole item: every attribute's name and value.
pub fn item_size(item: &Map<String, Value>) -> Result<u64, SizeError> {
    item.iter().map(|(name, value)| attribute_size(name, value)).sum()
}

/// One attribute: its name's UTF-8 bytes and its value.
pub fn attribute_size(name: &str, value: &Value) -> Result<u64, SizeError> {
    Ok(name.len() as u64 + value_size(value)?)
}

/// The size of a value alone, without a name.
pub fn value_size(value: &Value) -> Result<u64, SizeError> {
    let (kind, inner) = single_entry(value)?;
    match (kind, inner) {
        ("S", Value::String(s)) => Ok(s.len() as u64),
        ("N", Value::String(n)) => number_size(n),
        ("B", Value::String(b)) => binary_size(b),
        ("BOOL", Value::Bool(_)) | ("NULL", Value::Bool(_)) => Ok(1),
        ("SS", Value::Array(items)) => items.iter().map(|s| text(s).map(|s| s.len() as u64)).sum(),
        ("NS", Value::Array(items)) => items.iter().map(|n| number_size(text(n)?)).sum(),
        ("BS", Value::Array(items)) => items.iter().map(|b| binary_size(text(b)?)).sum(),
        // 3 bytes for the list, 1 per element.
        ("L", Value::Array(items)) => items.iter().try_fold(3, |total, v| Ok(total + 1 + value_size(v)?)),
        // 3 bytes for the map, 1 per element, and each element's name.
        ("M", Value::Object(entries)) => {
            entries.iter().try_fold(3, |total, (name, v)| Ok(total + 1 + attribute_size(name, v)?))
        }
        _ => Err(SizeError(value.to_string())),
    }
}

/// `{"S": "x"}` as `("S", "x")`.
pub fn single_entry(value: &Value) -> Result<(&str, &Value), SizeError> {
    match value.as_object() {
        Some(map) if map.len() == 1 => {
            let (kind, inner) = map.iter().next().expect("one entry");
            Ok((kind.as_str(), inner))
        }
        _ => Err(SizeError(value.to_string())),
    }
}

fn text(value: &Value) -> Result<&str, SizeError> {
    value.as_str().ok_or_else(|| SizeError(value.to_string()))
}

/// The documented rule: 1 byte per two significant digits (rounded up), plus
/// 1 byte. Leading and trailing zeros are not significant; the sign, the
/// decimal point and an exponent are not digits of the mantissa.
pub fn number_size(number: &str) -> Result<u64, SizeError> {
    let mantissa = number.split(['e', 'E']).next().unwrap_or_default();
    let mantissa = mantissa.trim_start_matches(['-', '+']);
    if mantissa.is_empty() || !mantissa.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(SizeError(format!("number {number:?}")));
    }
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    Ok(significant.div_ceil(2) + 1)
}

/// Binary values travel base64-encoded; their raw length counts.
fn binary_size(encoded: &str) -> Result<u64, SizeError> {
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map(|raw| raw.len() as u64)
        .map_err(|_| SizeError(format!("binary {encoded:?} is not base64")))
}

/// Write units of writing `size` bytes: one per started KB, at least one.
pub fn write_units(size: u64) -> f64 {
    size.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// How a read is made, which sets its price per 4 KB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    Eventual,
    Strong,
    Transactional,
}

impl Consistency {
    /// Read units per started 4 KB: half, one, or two.
    pub fn per_4kb(self) -> f64 {
        match self {
            Consistency::Eventual => 0.5,
            Consistency::Strong => 1.0,
            Consistency::Transactional => 2.0,
        }
    }
}

/// Read units of reading `size` bytes (one item, or a Query's whole answer,
/// which DynamoDB rounds once per request): per started 4 KB, at least one
/// 4 KB (a read of nothing still costs the minimum).
pub fn read_units(size: u64, consistency: Consistency) -> f64 {
    size.div_ceil(READ_UNIT_BYTES).max(1) as f64 * consistency.per_4kb()
}

/// An item and a value as DynamoDB JSON (`{"S": "x"}`, binary in base64),
/// from an SDK's `AttributeValue`: `item_to_json` and `value_to_json`,
/// defined where this is invoked for the type it names. aws-sdk-dynamodb's
/// (items read through the SDK, sized here) and aws-sdk-dynamodbstreams'
/// (a stream record's images, written out as the Streams API and Lambda
/// do: `sim::wire`) have the same variants but are two types with no trait
/// in common, so the one body is here and each module invokes it.
macro_rules! dynamodb_json {
    ($value:ident) => {
        /// An item (or a map's entries) as DynamoDB JSON.
        pub fn item_to_json(
            item: &::std::collections::HashMap<String, $value>,
        ) -> ::serde_json::Map<String, ::serde_json::Value> {
            item.iter().map(|(name, value)| (name.clone(), value_to_json(value))).collect()
        }

        /// One attribute value as DynamoDB JSON.
        pub fn value_to_json(value: &$value) -> ::serde_json::Value {
            use ::base64::Engine as _;
            use ::serde_json::json;
            let b64 = |bytes: &[u8]| ::base64::engine::general_purpose::STANDARD.encode(bytes);
            match value {
                $value::S(s) => json!({"S": s}),
                $value::N(n) => json!({"N": n}),
                $value::B(b) => json!({"B": b64(b.as_ref())}),
                $value::Bool(b) => json!({"BOOL": b}),
                $value::Null(n) => json!({"NULL": n}),
                $value::Ss(items) => json!({"SS": items}),
                $value::Ns(items) => json!({"NS": items}),
                $value::Bs(items) => json!({"BS": items.iter().map(|b| b64(b.as_ref())).collect::<Vec<_>>()}),
                $value::L(items) => json!({"L": items.iter().map(value_to_json).collect::<Vec<_>>()}),
                $value::M(entries) => json!({"M": item_to_json(entries)}),
                // A type newer than this code (the SDK read it, so it
                // exists): the one value every reader accepts and sizes,
                // rather than an item or a record that fails.
                _ => json!({"NULL": true}),
            }
        }
    };
}
pub(crate) use dynamodb_json;

dynamodb_json!(AttributeValue);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(value: Value) -> u64 {
        value_size(&value).unwrap()
    }

    #[test]
    fn strings_count_utf8_bytes_of_name_and_value() {
        assert_eq!(attribute_size("name", &json!({"S": "abc"})).unwrap(), 7);
        // "é" is 2 bytes, "€" 3, "😀" 4.
        assert_eq!(attribute_size("é", &json!({"S": "€😀"})).unwrap(), 9);
        assert_eq!(size(json!({"S": ""})), 0);
    }

    #[test]
    fn numbers_count_one_byte_per_two_significant_digits_plus_one() {
        assert_eq!(number_size("0").unwrap(), 1);
        assert_eq!(number_size("1").unwrap(), 2);
        assert_eq!(number_size("12").unwrap(), 2);
        assert_eq!(number_size("123").unwrap(), 3);
        // Leading and trailing zeros are trimmed, wherever the point is.
        assert_eq!(number_size("1000000").unwrap(), 2);
        assert_eq!(number_size("0.0012").unwrap(), 2);
        assert_eq!(number_size("-12.50").unwrap(), 3);
        assert_eq!(number_size("105").unwrap(), 3);
        assert_eq!(number_size("1.5E+10").unwrap(), 2);
        // 38 digits, the most DynamoDB takes.
        assert_eq!(number_size(&"9".repeat(38)).unwrap(), 20);
        assert!(number_size("abc").is_err());
        assert!(number_size("").is_err());
    }

    #[test]
    fn binaries_count_raw_bytes_not_base64() {
        // "aGVsbG8=" is "hello".
        assert_eq!(size(json!({"B": "aGVsbG8="})), 5);
        assert!(value_size(&json!({"B": "not base64!"})).is_err());
    }

    #[test]
    fn booleans_and_nulls_are_one_byte() {
        assert_eq!(size(json!({"BOOL": false})), 1);
        assert_eq!(size(json!({"NULL": true})), 1);
    }

    #[test]
    fn sets_are_the_sum_of_their_elements() {
        assert_eq!(size(json!({"SS": ["a", "bc"]})), 3);
        assert_eq!(size(json!({"NS": ["1", "123"]})), 2 + 3);
        assert_eq!(size(json!({"BS": ["aGVsbG8=", "AA=="]})), 5 + 1);
    }

    #[test]
    fn lists_and_maps_add_three_bytes_and_one_per_element() {
        assert_eq!(size(json!({"L": []})), 3);
        assert_eq!(size(json!({"M": {}})), 3);
        assert_eq!(size(json!({"L": [{"S": "ab"}, {"N": "1"}]})), 3 + (1 + 2) + (1 + 2));
        // Map elements count their names too.
        assert_eq!(size(json!({"M": {"k": {"S": "v"}}})), 3 + 1 + 1 + 1);
        let nested = json!({"M": {"items": {"L": [{"M": {"sku": {"S": "A1"}, "q": {"N": "2"}}}]}}});
        let line = 3 + (1 + 3 + 2) + (1 + 1 + 2);
        assert_eq!(size(nested), 3 + 1 + 5 + (3 + 1 + line));
    }

    #[test]
    fn an_item_is_the_sum_of_its_attributes() {
        let item = json!({"PK": {"S": "ORDER#1"}, "total": {"N": "1999"}, "paid": {"BOOL": true}});
        let item = item.as_object().unwrap();
        assert_eq!(item_size(item).unwrap(), (2 + 7) + (5 + 3) + (4 + 1));
    }

    #[test]
    fn values_that_are_not_dynamodb_json_are_refused() {
        assert!(value_size(&json!("plain")).is_err());
        assert!(value_size(&json!({"S": "a", "N": "1"})).is_err());
        assert!(value_size(&json!({"X": "a"})).is_err());
        assert!(value_size(&json!({"S": 1})).is_err());
    }

    #[test]
    fn writes_round_up_to_whole_kilobytes() {
        assert_eq!(write_units(0), 1.0);
        assert_eq!(write_units(1), 1.0);
        assert_eq!(write_units(1024), 1.0);
        assert_eq!(write_units(1025), 2.0);
        assert_eq!(write_units(3500), 4.0);
    }

    #[test]
    fn reads_round_up_to_4kb_and_price_by_consistency() {
        assert_eq!(read_units(0, Consistency::Strong), 1.0);
        assert_eq!(read_units(4096, Consistency::Strong), 1.0);
        assert_eq!(read_units(4097, Consistency::Strong), 2.0);
        assert_eq!(read_units(3500, Consistency::Eventual), 0.5);
        // The developer guide's Query example: 8 items of 2,000 bytes,
        // eventually consistent, is 2 units.
        assert_eq!(read_units(16_000, Consistency::Eventual), 2.0);
        assert_eq!(read_units(9000, Consistency::Transactional), 6.0);
    }
}
