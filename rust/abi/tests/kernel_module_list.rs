//! The kernel module compiles the host crates' files directly: each
//! `#[path = "<crate>/src"] pub mod <name> { ... }` block of
//! `rust/metaroce.rs` (the engine's and this crate's) lists the modules of
//! `rust/<crate>/src/lib.rs` again, because a kernel crate cannot include
//! another crate's root. This keeps every such list equal to its crate's,
//! so a file added to a crate is never left out of the kernel.
//!
//! A module the kernel implements its own way stands in the list as a
//! re-export from the driver's safe layer (`pub(crate) use crate::ib::crc;`:
//! the kernel's `crc32_le` for the engine's CRC), and counts as that module.

use std::path::Path;

/// The `pub mod <name>;` lines of `text`, a kernel stand-in
/// `pub(crate) use crate::ib::<name>;` read as `pub mod <name>;`.
fn mod_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter_map(|l| {
            let name = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) use crate::ib::"))?
                .strip_suffix(';')?;
            Some(format!("pub mod {name};"))
        })
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
