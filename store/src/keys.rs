//! Key layout (to be written).
