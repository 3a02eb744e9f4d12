// SPDX-License-Identifier: GPL-2.0

//! IP addresses of either family, kept in GID form: 16 bytes, an IPv4
//! address as the IPv4-mapped `::ffff:a.b.c.d` (RoCE v2's GIDs, and the
//! PLANES entries of protocol.md 1.8, write addresses so). One form means
//! one comparison, one size, and no tag to keep in step with the bytes.

use super::skb::Ipv4Addr;

/// An IPv4 or IPv6 address in GID form. All zeros is the unspecified
/// address (`::`), which stands for "none" or "let the route choose".
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct IpAddr(pub(crate) [u8; 16]);

/// The family of an address (and so of the packet headers it is sent with).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Family {
    V4,
    V6,
}

impl IpAddr {
    /// `::`: no address.
    pub(crate) const UNSPECIFIED: Self = Self([0; 16]);

    /// An IPv4 address as `::ffff:a.b.c.d`.
    pub(crate) fn from_v4(ip: Ipv4Addr) -> Self {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&ip.0);
        Self(g)
    }

    /// The IPv4 address of an IPv4-mapped address.
    pub(crate) fn v4(&self) -> Option<Ipv4Addr> {
        let g = &self.0;
        (g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff)
            .then(|| Ipv4Addr([g[12], g[13], g[14], g[15]]))
    }

    /// IPv4 (IPv4-mapped) or IPv6.
    pub(crate) fn family(&self) -> Family {
        if self.v4().is_some() {
            Family::V4
        } else {
            Family::V6
        }
    }

    /// `::`, or the IPv4 `0.0.0.0` (`::ffff:0.0.0.0`): no address.
    pub(crate) fn is_unspecified(&self) -> bool {
        *self == Self::UNSPECIFIED || self.v4() == Some(Ipv4Addr([0; 4]))
    }

    /// An IPv6 link-local unicast address (`fe80::/10`): it names a host
    /// only together with the link (the interface) it is reached on.
    pub(crate) fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }
}

impl From<Ipv4Addr> for IpAddr {
    fn from(ip: Ipv4Addr) -> Self {
        Self::from_v4(ip)
    }
}

impl core::fmt::Display for IpAddr {
    /// Dotted quad for IPv4; eight hex groups for IPv6, the longest run of
    /// two or more zero groups shortened to `::` (RFC 5952).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if let Some(v4) = self.v4() {
            return write!(f, "{v4}");
        }
        let groups: [u16; 8] =
            core::array::from_fn(|k| u16::from_be_bytes([self.0[2 * k], self.0[2 * k + 1]]));
        // The longest run of zero groups (first one on ties).
        let (mut best, mut best_len, mut run, mut run_len) = (0, 0, 0, 0);
        for (k, &g) in groups.iter().enumerate() {
            if g == 0 {
                if run_len == 0 {
                    run = k;
                }
                run_len += 1;
                if run_len > best_len {
                    (best, best_len) = (run, run_len);
                }
            } else {
                run_len = 0;
            }
        }
        let mut k = 0;
        while k < 8 {
            if best_len >= 2 && k == best {
                f.write_str("::")?;
                k += best_len;
                continue;
            }
            if k > 0 && !(best_len >= 2 && k == best + best_len) {
                f.write_str(":")?;
            }
            write!(f, "{:x}", groups[k])?;
            k += 1;
        }
        Ok(())
    }
}
