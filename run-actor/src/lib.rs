//! The run state machine (pure) and the runtime that loads runs, applies commands and commits.

pub mod machine;
