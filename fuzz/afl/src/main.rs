//! AFL++ entry of every fuzz target: `net_mana-afl <target>` runs the
//! target's check (`fuzz_checks::TARGETS`) on the inputs AFL++ feeds it, in
//! persistent mode. See doc/fuzzing.md.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = fuzz_checks::target(&name) else {
        let names: Vec<&str> = fuzz_checks::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("usage: net_mana-afl <target>; targets: {}", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| (target.check)(data));
}
