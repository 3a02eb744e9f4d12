// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Gives the provider library the name libibverbs dlopens as its SONAME.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmetaroce-rdmav34.so");
    println!("cargo:rerun-if-changed=build.rs");
}
