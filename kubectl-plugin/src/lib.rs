//! The kubectl plugins' library: [`common`] is the CLI plumbing both
//! `kubectl reverser` and `kubectl tatara` are built on (kubectl's flags, a
//! `kube::Client` from them, `-o table|json|yaml`, `error: ...` exits, shell
//! completion); [`reverser`] holds `kubectl reverser`'s subcommands and [`tatara`] `kubectl tatara`'s. Domain
//! logic lives in the `shared` crate; this crate only parses, calls, prints.

pub mod common;
pub mod reverser;
pub mod tatara;
