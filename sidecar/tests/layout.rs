//! The sidecar's code is laid out for an idle start (`sidecar/build.rs`,
//! `sidecar/startup.ld`, made by `scripts/startup-order`): the functions its
//! start-up runs are linked together, first, in `.text.startup`, so an idle
//! sidecar maps few code pages. The resident memory this buys is measured
//! by the sidecar benchmark; this checks the layout is there at all.
#![cfg(target_os = "linux")]

use object::{Object, ObjectSection, ObjectSymbol};

#[test]
fn the_functions_a_start_up_runs_are_linked_together_first() {
    let path = env!("CARGO_BIN_EXE_reverser-sidecar");
    let bytes = std::fs::read(path).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let startup = elf
        .section_by_name(".text.startup")
        .expect("no .text.startup section: sidecar/build.rs did not link with sidecar/startup.ld");
    let text = elf.section_by_name(".text").expect("a .text section");
    assert!(startup.address() < text.address(), "the start-up functions come first");
    assert!(startup.size() >= 256 * 1024, "only {} bytes of start-up code: is startup.ld stale?", startup.size());
    // The entry of the program's own code and the command-line parser are
    // among them, wherever the linker put them before.
    let inside = |needle: &str| {
        elf.symbols()
            .filter(|s| s.name().is_ok_and(|n| n.contains(needle)))
            .any(|s| (startup.address()..startup.address() + startup.size()).contains(&s.address()))
    };
    for needle in ["16reverser_sidecar4main17h", "6Parser16get_matches_with17h"] {
        assert!(inside(needle), "{needle} is not in .text.startup");
    }
}
