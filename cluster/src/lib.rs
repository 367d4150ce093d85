//! Actor hosts in a cluster: who is alive, which host holds which shard, and which scheduler
//! leads, all kept in the store with leases.
//!
//! ```text
//! shards.rs      shard of a routing key; rendezvous owner of a shard among live hosts (pure)
//! membership.rs  an actor host: its lease and host key, taking and giving up shards, fences
//! map.rs         the shard map a gateway routes by: live hosts and shard holders, watched
//! routing.rs     the run service a gateway or the scheduler calls: to each shard's owner over gRPC
//! guard.rs       an actor host's run service: admits a run's calls only while it owns the shard
//! election.rs    leader election over one key, for the scheduler
//! lease.rs       keeping a lease alive and noticing it is gone
//! mirror.rs      a copy in memory of one key prefix, kept current by a watch
//! task.rs        background tasks that end with their owner
//! ```
//!
//! Runs are placed by [`shard_of`] on a fixed number of shards; shards move between actor
//! hosts. Each host keeps a lease alive; its host key (`host/<id>`, a [`HostRecord`]) and every
//! shard key it holds (`shard/<n>`, its host id) are attached to that lease, so a host that
//! crashes loses them all when the lease expires, in one revision. Which live host should hold
//! a shard is decided by [`rendezvous_owner`], computed alike everywhere; a host takes a shard
//! only when its key is absent and gives one up only after its calls in flight ended, so a
//! shard has at most one holder at a time. The shard key's lease is the FENCE: every run write
//! compares it ([`ActorMembership::fence`]), so a host that lost a shard cannot write to it,
//! whatever it still believes.

#![forbid(unsafe_code)]

mod election;
mod guard;
mod lease;
mod map;
mod membership;
pub mod metrics;
mod mirror;
mod routing;
pub mod shards;
mod task;

pub use election::{Election, Leadership};
pub use guard::ShardGuard;
pub use map::ShardMap;
pub use membership::{ActorMembership, HostRecord, MembershipOptions, NotOwner, ShardPermit};
pub use routing::{RoutedRunService, RoutingOptions};
pub use shards::{DEFAULT_SHARDS, rendezvous_owner, shard_of};
