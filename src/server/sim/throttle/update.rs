//! A small evaluator of update expressions: the item an UpdateItem leaves,
//! so its size and its index keys are known before it is forwarded. It takes
//! what the app writes and the common simple forms: `SET a = :v, #n = b`,
//! `SET a = if_not_exists(a, :v)`, `SET a = a + :n` (or `-`),
//! `SET a = list_append(a, :l)`, `REMOVE a, b`, `ADD a :n` (numbers and
//! sets), `DELETE a :s`, on top-level attributes. Anything else (nested
//! paths, exponent numbers) is `Unsupported`, never guessed.

use super::schema::Item;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot evaluate the update expression: {0}")]
pub struct Unsupported(pub String);

/// The expression and its placeholders, as UpdateItem carries them.
pub struct Update<'a> {
    pub expression: &'a str,
    /// `ExpressionAttributeNames`: `#n` to a name.
    pub names: &'a Map<String, Value>,
    /// `ExpressionAttributeValues`: `:v` to a value in DynamoDB JSON.
    pub values: &'a Map<String, Value>,
}

/// The item after the update. Every operand reads the item as it was
/// before, as DynamoDB evaluates them (`SET a = b, b = a` swaps).
pub fn apply(old: &Item, update: &Update) -> Result<Item, Unsupported> {
    let mut new = old.clone();
    for (keyword, body) in clauses(update.expression)? {
        for action in split_top_level(body, ',') {
            let action = action.trim();
            match keyword.as_str() {
                "SET" => {
                    let (path, value) = action
                        .split_once('=')
                        .ok_or_else(|| Unsupported(format!("SET action without '=': {action}")))?;
                    let name = update.path(path)?;
                    let value = update.operand_sum(old, value)?;
                    new.insert(name, value);
                }
                "REMOVE" => {
                    new.remove(&update.path(action)?);
                }
                "ADD" | "DELETE" => {
                    let (path, operand) = action
                        .split_once(char::is_whitespace)
                        .ok_or_else(|| Unsupported(format!("{keyword} action without a value: {action}")))?;
                    let name = update.path(path)?;
                    let value = update.value(operand.trim())?;
                    match (keyword.as_str(), old.get(&name)) {
                        ("ADD", current) => {
                            new.insert(name, add(current, value)?);
                        }
                        (_, Some(current)) => match remove_from_set(current, value)? {
                            Some(rest) => {
                                new.insert(name, rest);
                            }
                            None => {
                                new.remove(&name);
                            }
                        },
                        (_, None) => {}
                    }
                }
                _ => unreachable!("clauses() yields only the four keywords"),
            }
        }
    }
    Ok(new)
}

impl Update<'_> {
    /// A top-level attribute name: `#alias` or a plain name.
    fn path(&self, text: &str) -> Result<String, Unsupported> {
        let text = text.trim();
        if text.contains(['.', '[']) {
            return Err(Unsupported(format!("nested path {text}")));
        }
        if text.starts_with('#') {
            return self
                .names
                .get(text)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| Unsupported(format!("no ExpressionAttributeNames entry for {text}")));
        }
        if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Unsupported(format!("path {text:?}")));
        }
        Ok(text.to_string())
    }

    fn value(&self, placeholder: &str) -> Result<&Value, Unsupported> {
        self.values
            .get(placeholder)
            .ok_or_else(|| Unsupported(format!("no ExpressionAttributeValues entry for {placeholder}")))
    }

    /// `operand`, `operand + operand` or `operand - operand`.
    fn operand_sum(&self, item: &Item, text: &str) -> Result<Value, Unsupported> {
        for op in ['+', '-'] {
            let parts = split_top_level(text, op);
            if parts.len() == 2 {
                let (a, b) = (self.operand(item, parts[0])?, self.operand(item, parts[1])?);
                let (a, b) = (number(&a)?, number(&b)?);
                let b = if op == '-' { negate(&b) } else { b };
                return Ok(json!({"N": decimal_add(&a, &b)?}));
            }
            if parts.len() > 2 {
                return Err(Unsupported(format!("more than two operands in {text}")));
            }
        }
        self.operand(item, text)
    }

    /// `:v`, a path, `if_not_exists(path, operand)` or `list_append(a, b)`.
    fn operand(&self, item: &Item, text: &str) -> Result<Value, Unsupported> {
        let text = text.trim();
        if text.starts_with(':') {
            return self.value(text).cloned();
        }
        if let Some((function, args)) = call(text) {
            let args = split_top_level(args, ',');
            return match (function.as_str(), args.as_slice()) {
                ("if_not_exists", [path, fallback]) => match item.get(&self.path(path)?) {
                    Some(value) => Ok(value.clone()),
                    None => self.operand(item, fallback),
                },
                ("list_append", [a, b]) => {
                    let (a, b) = (self.operand(item, a)?, self.operand(item, b)?);
                    match (a.get("L").and_then(Value::as_array), b.get("L").and_then(Value::as_array)) {
                        (Some(a), Some(b)) => Ok(json!({"L": a.iter().chain(b).cloned().collect::<Vec<_>>()})),
                        _ => Err(Unsupported(format!("list_append of non-lists in {text}"))),
                    }
                }
                _ => Err(Unsupported(format!("function {text}"))),
            };
        }
        let name = self.path(text)?;
        item.get(&name)
            .cloned()
            .ok_or_else(|| Unsupported(format!("operand {name} is not in the item (DynamoDB refuses such an update)")))
    }
}

/// The clauses of an expression, keyword (upper case) and body, split at
/// the four keywords where they stand as words outside parentheses.
fn clauses(expression: &str) -> Result<Vec<(String, &str)>, Unsupported> {
    let mut starts: Vec<(usize, usize, String)> = Vec::new();
    let bytes = expression.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            c if depth == 0 && c.is_ascii_alphabetic() && (i == 0 || !is_word_byte(bytes[i - 1])) => {
                let end = (i..bytes.len()).find(|&j| !is_word_byte(bytes[j])).unwrap_or(bytes.len());
                let word = expression[i..end].to_ascii_uppercase();
                if ["SET", "REMOVE", "ADD", "DELETE"].contains(&word.as_str()) {
                    starts.push((i, end, word));
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if starts.is_empty() || !expression[..starts[0].0].trim().is_empty() {
        return Err(Unsupported(format!("no SET, REMOVE, ADD or DELETE clause first in {expression:?}")));
    }
    Ok(starts
        .iter()
        .enumerate()
        .map(|(k, (_, end, word))| {
            let stop = starts.get(k + 1).map_or(expression.len(), |next| next.0);
            (word.clone(), &expression[*end..stop])
        })
        .collect())
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'#' || b == b':'
}

/// Splits at `separator` outside parentheses.
fn split_top_level(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            c if c == separator && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `name(args)` as `("name", "args")`.
fn call(text: &str) -> Option<(String, &str)> {
    let open = text.find('(')?;
    let inner = text.strip_suffix(')')?.get(open + 1..)?;
    Some((text[..open].trim().to_ascii_lowercase(), inner))
}

fn number(value: &Value) -> Result<String, Unsupported> {
    value
        .get("N")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Unsupported(format!("arithmetic on a non-number {value}")))
}

fn negate(number: &str) -> String {
    match number.strip_prefix('-') {
        Some(positive) => positive.to_string(),
        None => format!("-{}", number.trim_start_matches('+')),
    }
}

/// ADD: a number added to the attribute (absent: to zero), or elements
/// added to a set.
fn add(current: Option<&Value>, operand: &Value) -> Result<Value, Unsupported> {
    let Some(current) = current else {
        return Ok(operand.clone());
    };
    if let (Some(a), Some(b)) = (current.get("N").and_then(Value::as_str), operand.get("N").and_then(Value::as_str)) {
        return Ok(json!({"N": decimal_add(a, b)?}));
    }
    for kind in ["SS", "NS", "BS"] {
        if let (Some(a), Some(b)) =
            (current.get(kind).and_then(Value::as_array), operand.get(kind).and_then(Value::as_array))
        {
            let mut union = a.clone();
            union.extend(b.iter().filter(|v| !a.contains(v)).cloned());
            return Ok(json!({ kind: union }));
        }
    }
    Err(Unsupported(format!("ADD of {operand} to {current}")))
}

/// DELETE: elements taken from a set; None when none is left (DynamoDB
/// removes an emptied set).
fn remove_from_set(current: &Value, operand: &Value) -> Result<Option<Value>, Unsupported> {
    for kind in ["SS", "NS", "BS"] {
        if let (Some(a), Some(b)) =
            (current.get(kind).and_then(Value::as_array), operand.get(kind).and_then(Value::as_array))
        {
            let rest: Vec<Value> = a.iter().filter(|v| !b.contains(v)).cloned().collect();
            return Ok((!rest.is_empty()).then(|| json!({ kind: rest })));
        }
    }
    Err(Unsupported(format!("DELETE of {operand} from {current}")))
}

/// Exact decimal addition of two DynamoDB numbers (up to 38 digits), so the
/// result has the digits DynamoDB would store.
pub fn decimal_add(a: &str, b: &str) -> Result<String, Unsupported> {
    let (ma, sa) = parse_decimal(a)?;
    let (mb, sb) = parse_decimal(b)?;
    let scale = sa.max(sb);
    let widen = |m: i128, s: u32| m.checked_mul(10i128.checked_pow(scale - s)?);
    let sum = widen(ma, sa)
        .zip(widen(mb, sb))
        .and_then(|(x, y)| x.checked_add(y))
        .ok_or_else(|| Unsupported(format!("{a} + {b} overflows")))?;
    Ok(format_decimal(sum, scale))
}

/// `-12.50` as mantissa -1250 and scale 2.
fn parse_decimal(text: &str) -> Result<(i128, u32), Unsupported> {
    let bad = || Unsupported(format!("number {text:?}"));
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.trim_start_matches('+')),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && fraction.is_empty()) || !whole.chars().chain(fraction.chars()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let mantissa: i128 = format!("{whole}{fraction}").parse().map_err(|_| bad())?;
    Ok((if negative { -mantissa } else { mantissa }, fraction.len() as u32))
}

/// Back to text the way DynamoDB prints numbers: no trailing fractional zeros.
fn format_decimal(mantissa: i128, scale: u32) -> String {
    let digits = mantissa.unsigned_abs().to_string();
    let sign = if mantissa < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale as usize + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale as usize);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() { format!("{sign}{whole}") } else { format!("{sign}{whole}.{fraction}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::sim::throttle::schema::tests::item;

    fn run(old: Value, expression: &str, names: Value, values: Value) -> Result<Item, Unsupported> {
        let (names, values) = (names.as_object().unwrap().clone(), values.as_object().unwrap().clone());
        apply(&item(old), &Update { expression, names: &names, values: &values })
    }

    #[test]
    fn the_status_change_the_app_makes() {
        let old = json!({
            "PK": {"S": "ORDER#1"}, "status": {"S": "PENDING"},
            "GSI2PK": {"S": "STATUS#PENDING#2025-01-01#3"}, "GSI2SK": {"S": "t#1"},
        });
        let new = run(
            old,
            "SET #status = :to, updatedAt = :at REMOVE GSI2PK, GSI2SK",
            json!({"#status": "status"}),
            json!({":to": {"S": "CONFIRMED"}, ":from": {"S": "PENDING"}, ":at": {"S": "2025-01-01T10:00:00.000Z"}}),
        )
        .unwrap();
        assert_eq!(
            new,
            item(
                json!({"PK": {"S": "ORDER#1"}, "status": {"S": "CONFIRMED"}, "updatedAt": {"S": "2025-01-01T10:00:00.000Z"}})
            )
        );
    }

    #[test]
    fn the_consumers_counter_increments() {
        let old = json!({"PK": {"S": "METRIC#PENDING#2025-01-01"}, "SK": {"S": "COUNT"}, "pending": {"N": "9"}});
        let new = run(
            old,
            "ADD #a0 :v0, #a1 :v1",
            json!({"#a0": "pending", "#a1": "shard3"}),
            json!({":v0": {"N": "1"}, ":v1": {"N": "-1"}}),
        )
        .unwrap();
        assert_eq!(new["pending"], json!({"N": "10"}));
        assert_eq!(new["shard3"], json!({"N": "-1"}), "ADD to a missing number starts from zero");
    }

    #[test]
    fn the_consumers_checkpoint_and_lease() {
        let new = run(
            json!({"PK": {"S": "CHECKPOINT#arn"}, "SK": {"S": "SHARD#1"}, "seq": {"S": "1"}}),
            "SET #until = :until, #seq = :seq, finished = :finished",
            json!({"#until": "leaseUntil", "#seq": "seq", "#owner": "owner"}),
            json!({":until": {"N": "1700000000000"}, ":seq": {"S": "2"}, ":finished": {"BOOL": true}, ":me": {"S": "x"}}),
        )
        .unwrap();
        assert_eq!(new["seq"], json!({"S": "2"}));
        assert_eq!(new["leaseUntil"], json!({"N": "1700000000000"}));
        assert_eq!(new["finished"], json!({"BOOL": true}));
    }

    #[test]
    fn if_not_exists_and_arithmetic() {
        let new = run(
            json!({"a": {"N": "5"}, "n": {"N": "1.25"}}),
            "set a = if_not_exists(a, :zero), b = if_not_exists(b, :zero), n = n + :inc, m = n - :inc",
            json!({}),
            json!({":zero": {"N": "0"}, ":inc": {"N": "0.75"}}),
        )
        .unwrap();
        assert_eq!(new["a"], json!({"N": "5"}));
        assert_eq!(new["b"], json!({"N": "0"}));
        assert_eq!(new["n"], json!({"N": "2"}));
        assert_eq!(new["m"], json!({"N": "0.5"}), "operands read the item as it was");
    }

    #[test]
    fn swaps_read_the_old_item() {
        let new = run(json!({"a": {"S": "1"}, "b": {"S": "2"}}), "SET a = b, b = a", json!({}), json!({})).unwrap();
        assert_eq!(new["a"], json!({"S": "2"}));
        assert_eq!(new["b"], json!({"S": "1"}));
    }

    #[test]
    fn list_append_and_sets() {
        let new = run(
            json!({"l": {"L": [{"S": "a"}]}, "s": {"SS": ["x", "y"]}, "t": {"SS": ["x"]}}),
            "SET l = list_append(l, :more) ADD s :z DELETE t :x",
            json!({}),
            json!({":more": {"L": [{"S": "b"}]}, ":z": {"SS": ["y", "z"]}, ":x": {"SS": ["x"]}}),
        )
        .unwrap();
        assert_eq!(new["l"], json!({"L": [{"S": "a"}, {"S": "b"}]}));
        assert_eq!(new["s"], json!({"SS": ["x", "y", "z"]}));
        assert!(!new.contains_key("t"), "an emptied set is removed");
    }

    #[test]
    fn what_it_cannot_evaluate_is_unsupported() {
        let nested = run(json!({}), "SET a.b = :v", json!({}), json!({":v": {"S": "x"}}));
        assert!(nested.is_err());
        assert!(run(json!({}), "SET a = :missing", json!({}), json!({})).is_err());
        assert!(run(json!({}), "SET #x = :v", json!({}), json!({":v": {"S": "x"}})).is_err());
        assert!(run(json!({}), "SET a = size(b)", json!({}), json!({})).is_err());
        assert!(run(json!({}), "a = :v", json!({}), json!({":v": {"S": "x"}})).is_err());
        assert!(run(json!({"n": {"N": "1E3"}}), "SET n = n + :one", json!({}), json!({":one": {"N": "1"}})).is_err());
    }

    #[test]
    fn decimal_addition_is_exact() {
        assert_eq!(decimal_add("0.1", "0.2").unwrap(), "0.3");
        assert_eq!(decimal_add("-5", "3").unwrap(), "-2");
        assert_eq!(decimal_add("99999999999999999999", "1").unwrap(), "100000000000000000000");
        assert_eq!(decimal_add("-0.05", "0.04").unwrap(), "-0.01");
        assert_eq!(decimal_add("1.50", "1.50").unwrap(), "3");
    }
}
