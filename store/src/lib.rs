//! The narrow key-value interface the runtime needs from etcd, and its implementations.
