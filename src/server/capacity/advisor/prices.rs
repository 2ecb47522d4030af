//! The prices the advisor works with, and a prices file's overrides.

use crate::server::store::usage::ReadWrite;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Prices in dollars. A prices file (`Prices::from_json_file`) overrides any
/// subset of them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Prices {
    /// Per million write request units, on demand.
    pub on_demand_write_per_million: f64,
    /// Per million read request units, on demand.
    pub on_demand_read_per_million: f64,
    /// Per write capacity unit-hour, provisioned.
    pub provisioned_wcu_hour: f64,
    /// Per read capacity unit-hour, provisioned.
    pub provisioned_rcu_hour: f64,
}

/// us-east-1 standard table class, after the November 2024 on-demand price
/// cut.
impl Default for Prices {
    fn default() -> Self {
        Self {
            on_demand_write_per_million: 0.625,
            on_demand_read_per_million: 0.125,
            provisioned_wcu_hour: 0.00065,
            provisioned_rcu_hour: 0.00013,
        }
    }
}

/// What is wrong with a set of prices; `origin` is the file they came from
/// (or what else supplied them).
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    #[error("cannot read the prices file {origin}: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: not a JSON object of prices: {detail}")]
    Syntax { origin: String, detail: String },
    #[error("{origin}: unknown price `{field}` (expected {})", Prices::FIELDS.join(", "))]
    UnknownField { origin: String, field: String },
    #[error("{origin}: `{field}` must be a positive number of dollars, not {value}")]
    BadValue { origin: String, field: String, value: String },
}

impl Prices {
    /// The JSON names of the fields, as serde spells them (a test keeps the
    /// two in step).
    pub const FIELDS: [&'static str; 4] =
        ["onDemandWritePerMillion", "onDemandReadPerMillion", "provisionedWcuHour", "provisionedRcuHour"];

    /// Prices from a JSON file such as `{"provisionedWcuHour": 0.00074}`:
    /// the fields it names override the defaults. TOML is not read: no TOML
    /// parser is among the app's dependencies.
    pub fn from_json_file(path: &Path) -> Result<Self, PricesError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| PricesError::Read { origin: origin.clone(), source })?;
        Self::from_json_str(&text, &origin)
    }

    /// As `from_json_file`, from text; `origin` names it in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, PricesError> {
        let syntax =
            |err: serde_json::Error| PricesError::Syntax { origin: origin.to_string(), detail: err.to_string() };
        // Checked field by field first: serde's own errors do not name the
        // field whose value has the wrong type.
        let fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text).map_err(syntax)?;
        for (field, value) in &fields {
            if !Self::FIELDS.contains(&field.as_str()) {
                return Err(PricesError::UnknownField { origin: origin.to_string(), field: field.clone() });
            }
            if value.as_f64().is_none_or(|price| !is_price(price)) {
                return Err(PricesError::BadValue {
                    origin: origin.to_string(),
                    field: field.clone(),
                    value: value.to_string(),
                });
            }
        }
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(syntax)
    }

    /// Every price positive and finite, or an error naming the first that
    /// is not (`origin` says where the prices came from).
    pub fn check(&self, origin: &str) -> Result<(), PricesError> {
        let values = [
            self.on_demand_write_per_million,
            self.on_demand_read_per_million,
            self.provisioned_wcu_hour,
            self.provisioned_rcu_hour,
        ];
        match Self::FIELDS.iter().zip(values).find(|(_, v)| !is_price(*v)) {
            Some((field, value)) => Err(PricesError::BadValue {
                origin: origin.to_string(),
                field: field.to_string(),
                value: value.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Dollars for one request unit on demand.
    pub fn on_demand_per_unit(&self, access: ReadWrite) -> f64 {
        match access {
            ReadWrite::Read => self.on_demand_read_per_million / 1e6,
            ReadWrite::Write => self.on_demand_write_per_million / 1e6,
        }
    }

    /// Dollars for one provisioned capacity unit held for one second: what
    /// one consumed unit costs when provisioned capacity is fully used.
    pub fn provisioned_per_unit_second(&self, access: ReadWrite) -> f64 {
        self.provisioned_per_unit_hour(access) / 3600.0
    }

    pub(super) fn provisioned_per_unit_hour(&self, access: ReadWrite) -> f64 {
        match access {
            ReadWrite::Read => self.provisioned_rcu_hour,
            ReadWrite::Write => self.provisioned_wcu_hour,
        }
    }

    /// How many times fully used provisioned capacity a unit costs on
    /// demand (about 3.5 at the default prices).
    pub fn on_demand_premium(&self, access: ReadWrite) -> f64 {
        self.on_demand_per_unit(access) / self.provisioned_per_unit_second(access)
    }

    /// The average utilisation of provisioned capacity above which it is
    /// cheaper than on demand: provisioned price per unit-second ÷ on-demand
    /// price per unit (about 29% at the default prices).
    pub fn break_even_utilisation(&self, access: ReadWrite) -> f64 {
        self.provisioned_per_unit_second(access) / self.on_demand_per_unit(access)
    }
}

fn is_price(value: f64) -> bool {
    value.is_finite() && value > 0.0
}
