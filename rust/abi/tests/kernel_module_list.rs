//! The kernel module compiles the host crates' files directly: each
//! `#[path = "<crate>/src"] pub mod <name> { ... }` block of
//! `rust/metaroce.rs` (the engine's and this crate's) lists the modules of
//! `rust/<crate>/src/lib.rs` again, because a kernel crate cannot include
//! another crate's root. This keeps every such list equal to its crate's,
//! so a file added to a crate is never left out of the kernel.

use std::path::Path;

fn mod_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub mod ") && l.ends_with(';'))
        .map(String::from)
        .collect()
}

/// The module list of the block that `#[path = "<dir>/src"]` opens.
fn kernel_list(kernel: &str, dir: &str) -> Vec<String> {
    let attr = format!("#[path = \"{dir}/src\"]");
    let start = kernel
        .find(&attr)
        .unwrap_or_else(|| panic!("rust/metaroce.rs has no {attr} block"));
    let end = start + kernel[start..].find("\n}").expect("unterminated block");
    mod_lines(&kernel[start..end])
}

#[test]
fn kernel_crate_lists_every_module_of_the_included_crates() {
    let rust = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let kernel = std::fs::read_to_string(rust.join("metaroce.rs")).unwrap();
    for dir in ["engine", "abi"] {
        let lib = std::fs::read_to_string(rust.join(dir).join("src/lib.rs")).unwrap();
        let modules = mod_lines(&lib);
        assert!(!modules.is_empty(), "no modules found in {dir}/src/lib.rs");
        assert_eq!(modules, kernel_list(&kernel, dir), "{dir}");
    }
}
