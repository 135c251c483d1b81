//! Links `reverser-sidecar` with `startup.ld` (made by scripts/startup-order):
//! the functions it runs from its start until it idles come first in its
//! code. The kernel maps code in 64 KiB blocks around each page a process
//! touches, and those functions are spread over 12 MB of code otherwise: an
//! idle sidecar held 5.3 MiB of code pages, now 2.1 MiB. The script only
//! orders sections (`INSERT BEFORE .text`), so lld and GNU ld both take it,
//! and a function it does not name links in `.text` as before.

fn main() {
    // Read when the script runs, not baked in when it was compiled: a build
    // script compiled in one checkout may be reused by another sharing the
    // target directory, and must name this checkout's file.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR for build scripts");
    let script = std::path::Path::new(&dir).join("startup.ld");
    println!("cargo::rerun-if-changed={}", script.display());
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        println!("cargo::rustc-link-arg-bin=reverser-sidecar=-Wl,-T,{}", script.display());
    }
}
