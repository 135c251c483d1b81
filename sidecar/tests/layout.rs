//! The sidecar's code is laid out for an idle start (`sidecar/build.rs`,
//! `sidecar/startup.ld`, made by `scripts/startup-order`): the functions its
//! start-up runs are linked together, first, in `.text.startup`, so an idle
//! sidecar maps few code pages; the other functions a `Resolve` runs follow,
//! in `.text.hot`, so a call's code is dense. The resident memory and the
//! call latency this buys are measured by the sidecar benchmark; this checks
//! the layout is there at all.
#![cfg(target_os = "linux")]

use object::{Object, ObjectSection, ObjectSymbol};

#[test]
fn the_functions_a_start_up_and_a_resolve_run_are_linked_together_first() {
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
    let inside = |section: &object::Section<'_, '_>, needle: &str| {
        elf.symbols()
            .filter(|s| s.name().is_ok_and(|n| n.contains(needle)))
            .any(|s| (section.address()..section.address() + section.size()).contains(&s.address()))
    };
    for needle in ["16reverser_sidecar4main17h", "6Parser16get_matches_with17h"] {
        assert!(inside(&startup, needle), "{needle} is not in .text.startup");
    }
    let hot = elf.section_by_name(".text.hot").expect("no .text.hot section: is startup.ld stale?");
    assert!(startup.address() < hot.address() && hot.address() < text.address(), "the Resolve path comes second");
    // The handler and h2's frame reader: a call runs them, a start-up not.
    for needle in ["3api3Api13resolve_event", "10connection22DynConnection$LT$B$GT$10recv_frame17h"] {
        assert!(inside(&hot, needle), "{needle} is not in .text.hot");
    }
}
