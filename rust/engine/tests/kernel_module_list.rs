//! The kernel module compiles the engine's files directly (see
//! `rust/metaroce.rs`, `pub mod engine`), listing them again because a
//! kernel crate cannot include another crate's root. This keeps the two
//! lists equal, so a file added here is never left out of the kernel.

use std::path::Path;

fn mod_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub mod ") && l.ends_with(';'))
        .map(String::from)
        .collect()
}

#[test]
fn kernel_crate_lists_every_engine_module() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let kernel = std::fs::read_to_string(dir.join("../metaroce.rs")).unwrap();
    let start = kernel
        .find("pub mod engine {")
        .expect("rust/metaroce.rs has no `pub mod engine { ... }` block");
    let end = start
        + kernel[start..]
            .find("\n}")
            .expect("unterminated engine block");
    let engine = mod_lines(&lib);
    assert!(!engine.is_empty(), "no modules found in src/lib.rs");
    assert_eq!(engine, mod_lines(&kernel[start..end]));
}
