//! What every integration test file shares, once: real servers of the four
//! supported flavors started with the freshly built module (`server`),
//! replies (`replies`), the error catalogues' messages and runner
//! (`catalogue`), a request's whole life (`lifecycle`), INFO, configs and clocks (`info`), dataset
//! snapshots and their comparison (`dataset`), primaries, replicas and
//! crashes (`replication`), and deterministic workloads (`workload`).
//!
//! Environment: `LIBRL_MODULE` (the module); `REDIS_SERVER`,
//! `REDIS8_SERVER`, `VALKEY8_SERVER` and `VALKEY_SERVER` (the Redis 7.0,
//! Redis 8, Valkey 8 and Valkey 9 binaries, or wrappers such as
//! scripts/valgrind-server.sh); `LIBRL_SERVERS` (run only these flavors,
//! e.g. `redis7,valkey9`); `LIBRL_SLOW=1` (servers under valgrind: longer
//! start-up, stop and wait timeouts).
#![allow(dead_code, unused_imports)]

mod catalogue;
mod dataset;
mod info;
mod lifecycle;
mod replication;
mod replies;
mod server;
mod workload;

pub use catalogue::*;
pub use dataset::*;
pub use info::*;
pub use lifecycle::*;
pub use replication::*;
pub use replies::*;
pub use server::*;
pub use workload::*;
