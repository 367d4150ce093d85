//! The protocol's vocabulary every role shares, without the run machine's rules.
//!
//! ```text
//! time.rs        Timestamp: milliseconds since the epoch, RFC 3339
//! error_code.rs  ErrorCode: the protocol's error codes (spec §4.3)
//! hex.rs         hex: lower-case hex of bytes
//! run_ids.rs     started runs' ids, `start_run` seeds, routing keys; Fresh, values from a seed
//! token.rs       claim tokens: run id in the clear, hashed secret
//! upload.rs      UploadStatus: what the blob store says about an upload id
//! ```

mod error_code;
mod hex;
mod run_ids;
mod time;
pub mod token;
mod upload;

pub use error_code::ErrorCode;
pub use hex::hex;
pub use run_ids::{Fresh, run_routing_key, start_routing_key, start_run_id, start_seed};
pub use time::{Timestamp, days_in_month};
pub use token::TokenHash;
pub use upload::UploadStatus;
