//! How libibverbs recognises a MetaRoCE device (safe).
//!
//! rdma-core 44 (`libibverbs/init.c`) first offers a device whose netlink
//! driver id is not `RDMA_DRIVER_UNKNOWN` to the providers whose match table
//! lists that id, then to every provider in turn: a table match (driver id,
//! then name, then the parent's modalias) followed by the provider's
//! `match_device` callback, which is called whether or not the table
//! matched and has the final word.
//!
//! MetaRoCE devices are matched by identity, never by name, so any name
//! given to `rdma link add` works:
//! - by driver id `METAROCE_DRIVER_ID` (0x4d52, "MR"), the id the kernel
//!   side is moving to (no upstream `enum rdma_driver_id` entry exists):
//!   the match table lists it, which also wins the priority pass over
//!   providers that match by name prefix (rxe claims names "rxe*");
//! - for kernels that report `RDMA_DRIVER_UNKNOWN` (the committed driver at
//!   the time of writing), by the first word of `<ibdev_path>/node_desc`
//!   being `MetaRoCE`, the node description our kernel driver sets
//!   (rust/driver/link.rs). Table matching skips UNKNOWN, a software device
//!   has no parent modalias, and name matching would tie users to a
//!   prefix, so `match_device` reads node_desc. The first word only, to
//!   allow a host-qualified description ("MetaRoCE hostA").
//!
//! No rxe/siw/hardware device is claimed: they report their own driver ids.
//! The uverbs ABI version must also equal `METAROCE_UVERBS_ABI_VERSION`.
//! libibverbs could check that itself (`match_{min,max}_abi_version`), but
//! would drop a device of another version before asking us and without a
//! word; so the provider accepts every version there and `claim` refuses
//! the device with a warning naming both versions (a metaroce.ko and a
//! provider from different builds).

use std::path::Path;

use crate::sys;

/// The node description our kernel driver sets.
pub(crate) const NODE_DESC: &str = "MetaRoCE";

/// The driver id of MetaRoCE devices: `METAROCE_DRIVER_ID` of
/// metaroce-abi.h (being added there by the kernel side; the test
/// `driver_id_agrees_with_the_header` keeps the two equal once it is).
pub(crate) const METAROCE_DRIVER_ID: u32 = 0x4d52;

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
    if driver_id == METAROCE_DRIVER_ID {
        return true;
    }
    if driver_id != sys::rdma_driver_id_RDMA_DRIVER_UNKNOWN {
        return false;
    }
    match std::fs::read(ibdev_path.join("node_desc")) {
        Ok(c) => node_desc_matches(&c),
        Err(_) => false,
    }
}

/// The decision on a device: `Ok(true)` ours, `Ok(false)` not ours,
/// `Err(v)` a MetaRoCE device whose kernel driver speaks uverbs ABI `v`,
/// which this provider does not.
pub(crate) fn claim(ibdev_path: &Path, driver_id: u32, abi_ver: u32) -> Result<bool, u32> {
    if !device_matches(ibdev_path, driver_id) {
        return Ok(false);
    }
    if abi_ver != sys::METAROCE_UVERBS_ABI_VERSION {
        return Err(abi_ver);
    }
    Ok(true)
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

    /// If metaroce-abi.h defines METAROCE_DRIVER_ID, it is ours.
    #[test]
    fn driver_id_agrees_with_the_header() {
        let h = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/uapi/rdma/metaroce-abi.h");
        let text = fs::read_to_string(h).unwrap();
        let def = text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some("METAROCE_DRIVER_ID"))
                .then(|| w.next().map(str::to_owned))
                .flatten()
        });
        if let Some(v) = def {
            let v = v.trim_start_matches("0x");
            assert_eq!(u32::from_str_radix(v, 16).unwrap(), METAROCE_DRIVER_ID);
        }
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
        // Our own driver id needs nothing else.
        assert!(device_matches(&d, METAROCE_DRIVER_ID));
        assert!(!device_matches(&root.join("missing"), unknown));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn claim_needs_our_uverbs_abi() {
        let ours = sys::METAROCE_UVERBS_ABI_VERSION;
        let rxe = sys::rdma_driver_id_RDMA_DRIVER_RXE;
        let nowhere = Path::new("/nonexistent");
        assert_eq!(claim(nowhere, METAROCE_DRIVER_ID, ours), Ok(true));
        assert_eq!(claim(nowhere, METAROCE_DRIVER_ID, ours + 1), Err(ours + 1));
        assert_eq!(claim(nowhere, METAROCE_DRIVER_ID, 0), Err(0));
        // Not ours: no verdict on its ABI.
        assert_eq!(claim(nowhere, rxe, ours + 1), Ok(false));
    }
}
