//! The `agentprocess` binary: the server's roles and the operator commands.

fn main() {}
