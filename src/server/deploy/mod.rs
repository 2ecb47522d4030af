//! Running it in production on AWS: the CloudFormation template generated
//! from the same table definitions `provision` uses.

pub mod template;
