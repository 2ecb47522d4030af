//! `northwind-ops throttle-proxy`: a partition-limit simulator. The local
//! engines never throttle; this reverse proxy sits in front of any DynamoDB
//! endpoint, computes what each request of the metered operations consumes
//! on the table and on each global secondary index the way DynamoDB does,
//! charges it to a token bucket per partition key value, and refuses what
//! is over the limit exactly as DynamoDB answers, so engineers can rehearse
//! hot partitions on a laptop. Everything else is forwarded untouched.
//!
//! Metered: PutItem, UpdateItem, DeleteItem, BatchWriteItem,
//! TransactWriteItems (writes, charged before they are forwarded, all or
//! nothing), GetItem, BatchGetItem and Query (reads: their size is known
//! only from the answer, so a read needs the minimum in its bucket to go
//! ahead and is charged the rest afterwards, possibly into debt).
//!
//! To price writes the proxy reads the old item itself (a consistent
//! GetItem upstream) and works out the new one; these extra reads are not
//! charged, and the read and the write are not atomic: a simulator's
//! approximation. Requests it cannot meter (an unknown table, a body it
//! cannot read) are forwarded as they are and counted.

pub mod buckets;
pub mod schema;
pub mod units;
pub mod update;
