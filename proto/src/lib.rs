//! Wire definitions for the run service between gateways, actors and the scheduler.
