//! Actor hosts in a cluster: which host should hold which shard.
//!
//! ```text
//! shards.rs      shard of a routing key; rendezvous owner of a shard among live hosts (pure)
//! ```
//!
//! Runs are placed by [`shard_of`] on a fixed number of shards; shards move between actor
//! hosts. Which live host should hold a shard is decided by [`rendezvous_owner`], computed alike
//! everywhere.

#![forbid(unsafe_code)]

pub mod shards;

pub use shards::{DEFAULT_SHARDS, rendezvous_owner, shard_of};
