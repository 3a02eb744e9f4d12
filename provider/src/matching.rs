//! How libibverbs recognises a MetaRoCE device (safe).
//!
//! rdma-core 44 (`libibverbs/init.c`) tries, per sysfs device and provider:
//! a match table (by driver id from netlink, then by name, then by the
//! parent's modalias), then the provider's `match_device` callback, which
//! is called whether or not the table matched and has the final word.
//!
//! None of the table kinds fits MetaRoCE: the kernel reports
//! `RDMA_DRIVER_UNKNOWN` (no id is assigned to us upstream, and table
//! matching skips UNKNOWN), a software device has no parent modalias, and
//! name matching would tie users to a name prefix. So the provider has no
//! table and a `match_device` that accepts a device when
//! - its netlink driver id is `RDMA_DRIVER_UNKNOWN`, and
//! - the first word of `<ibdev_path>/node_desc` is `MetaRoCE`, the node
//!   description our kernel driver sets (rust/driver/link.rs).
//!
//! This works for whatever name the user gives in `rdma link add`, never
//! claims an rxe/siw/hardware device (they report their own driver ids)
//! and leaves room for a host-qualified description ("MetaRoCE hostA").
//!
//! The uverbs ABI version must also equal `METAROCE_UVERBS_ABI_VERSION`,
//! which libibverbs checks against `match_{min,max}_abi_version`.

use std::path::Path;

use crate::sys;

/// The node description our kernel driver sets.
pub(crate) const NODE_DESC: &str = "MetaRoCE";

/// Whether a `node_desc` file's contents name a MetaRoCE device.
pub(crate) fn node_desc_matches(contents: &[u8]) -> bool {
    let text = contents.split(|b| *b == 0).next().unwrap_or(&[]);
    let first = text
        .split(|b| b.is_ascii_whitespace())
        .find(|w| !w.is_empty());
    first == Some(NODE_DESC.as_bytes())
}

/// The match decision for a device at `ibdev_path` (e.g.
/// `/sys/class/infiniband/mr0`) with netlink driver id `driver_id`.
pub(crate) fn device_matches(ibdev_path: &Path, driver_id: u32) -> bool {
    if driver_id != sys::rdma_driver_id_RDMA_DRIVER_UNKNOWN {
        return false;
    }
    match std::fs::read(ibdev_path.join("node_desc")) {
        Ok(c) => node_desc_matches(&c),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_dev(root: &Path, name: &str, desc: Option<&str>) -> std::path::PathBuf {
        let d = root.join("class/infiniband").join(name);
        fs::create_dir_all(&d).unwrap();
        if let Some(desc) = desc {
            fs::write(d.join("node_desc"), desc).unwrap();
        }
        d
    }

    #[test]
    fn node_desc_forms() {
        assert!(node_desc_matches(b"MetaRoCE\n"));
        assert!(node_desc_matches(b"MetaRoCE"));
        assert!(node_desc_matches(b"MetaRoCE hostA\n"));
        assert!(node_desc_matches(b"MetaRoCE\0\0\0"));
        assert!(!node_desc_matches(b"metaroce\n"));
        assert!(!node_desc_matches(b"MetaRoCEx\n"));
        assert!(!node_desc_matches(b"rxe\n"));
        assert!(!node_desc_matches(b""));
        assert!(!node_desc_matches(b"\n"));
    }

    #[test]
    fn fake_sysfs() {
        let root = std::env::temp_dir().join(format!("metaroce-match-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let unknown = sys::rdma_driver_id_RDMA_DRIVER_UNKNOWN;
        let rxe = sys::rdma_driver_id_RDMA_DRIVER_RXE;
        // Any name works.
        for name in ["mr0", "fabric-a", "rxe0"] {
            let d = fake_dev(&root, name, Some("MetaRoCE\n"));
            assert!(device_matches(&d, unknown), "{name}");
            assert!(!device_matches(&d, rxe), "{name}: driver id wins");
        }
        let d = fake_dev(&root, "mlx5_0", Some("host mlx5_0\n"));
        assert!(!device_matches(&d, unknown));
        let d = fake_dev(&root, "nodesc", None);
        assert!(!device_matches(&d, unknown));
        assert!(!device_matches(&root.join("missing"), unknown));
        fs::remove_dir_all(&root).unwrap();
    }
}
