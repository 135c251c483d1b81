//! Real parts and fakes for every crate's tests and benchmarks: a real
//! `redis-server` on a free loopback port ([`RedisServer`]), the fake
//! Kubernetes API ([`fakeapi`]), a fake GitHub ([`fake_github`]), a fake tatara
//! operator REST API ([`fake_operator`]), a smart-HTTP
//! Git server behind token auth ([`git_http`]), a real `sshd` serving Git
//! over SSH ([`ssh_git`]), the
//! vendored fixtures ([`fixtures`]), audit-event builders ([`audit`]) and
//! harnesses that run the real binaries ([`sidecar`], [`kubectl`]). Never a
//! dependency of the product itself.

pub mod audit;
pub mod audit_webhook;
pub mod fake_github;
pub mod fake_operator;
pub mod fakeapi;
pub mod fixtures;
pub mod git_http;
pub mod kubectl;
pub mod mirror;
pub mod process;
mod redis;
pub mod sidecar;
pub mod ssh_git;
pub mod tls;

pub use audit::{audit_event, event_list};
pub use redis::{RedisServer, TlsFiles, free_port};
