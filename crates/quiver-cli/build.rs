//! The command starts in a fresh process for every query, so its start-up counts. As a
//! position-independent executable, the dynamic loader applied 198,000 relocations to
//! 3 MB of pointer tables at every start (a third of `quiver query "SELECT 1"`): linked at
//! a fixed address, it applies none (docs/decisions.md, "Speed").
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
