//! Running it in production on AWS: the CloudFormation template generated
//! from the same table definitions `provision` uses, and the IAM policies
//! of `docs/iam/` its roles take.

pub mod iam;
pub mod template;
