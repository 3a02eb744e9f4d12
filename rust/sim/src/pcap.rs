//! Classic pcap files of IPv4/UDP frames: written with nanosecond
//! timestamps and Ethernet framing (linktype 1); read from any classic pcap
//! whose frames are Ethernet or raw IPv4 (linktypes 1, 101, 228), with
//! microsecond or nanosecond timestamps in either byte order.

use std::fmt;

/// Ethernet link type.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Raw IP link types (BSD value and IPv4-only value).
const LINKTYPE_RAW: [u32; 2] = [101, 228];
const MAGIC_US: u32 = 0xA1B2_C3D4;
const MAGIC_NS: u32 = 0xA1B2_3C4D;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_HLEN: usize = 14;
const IPV4_HLEN: usize = 20;
const UDP_HLEN: usize = 8;
const SNAPLEN: u32 = 65535;

/// One captured IPv4/UDP frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Capture time (ns since the start of the run, or since the epoch).
    pub t_ns: u64,
    /// Ethernet source address (zero for raw-IP captures).
    pub src_mac: [u8; 6],
    /// Ethernet destination address (zero for raw-IP captures).
    pub dst_mac: [u8; 6],
    /// IPv4 source address.
    pub src: [u8; 4],
    /// IPv4 destination address.
    pub dst: [u8; 4],
    /// IP ECN field (2 = ECT(0), 3 = CE).
    pub ecn: u8,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP payload (the MetaRoCE packet).
    pub payload: Vec<u8>,
}

/// Why a file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// Not a classic pcap file (pcapng, or another format).
    NotPcap,
    /// A link type other than Ethernet or raw IP.
    LinkType(u32),
    /// The file ends inside a record.
    Truncated,
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotPcap => write!(
                f,
                "not a classic pcap file (pcapng: convert with editcap -F pcap)"
            ),
            Self::LinkType(l) => write!(f, "link type {l} (only Ethernet and raw IP are read)"),
            Self::Truncated => write!(f, "file ends inside a record"),
        }
    }
}

/// The Internet checksum of an IPv4 header.
fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = hdr
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

impl Frame {
    /// The Ethernet frame: Ethernet, IPv4 (DF, TTL 64, ID 0), UDP
    /// (checksum 0, allowed over IPv4 by protocol.md 1), payload.
    pub fn to_ethernet(&self) -> Vec<u8> {
        let udp_len = UDP_HLEN + self.payload.len();
        let ip_len = IPV4_HLEN + udp_len;
        let mut b = Vec::with_capacity(ETH_HLEN + ip_len);
        b.extend_from_slice(&self.dst_mac);
        b.extend_from_slice(&self.src_mac);
        b.extend_from_slice(&ETH_P_IP.to_be_bytes());
        let ip = b.len();
        b.extend_from_slice(&[0x45, self.ecn & 3]);
        b.extend_from_slice(&(ip_len as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        b.extend_from_slice(&self.src);
        b.extend_from_slice(&self.dst);
        let sum = ipv4_checksum(&b[ip..ip + IPV4_HLEN]);
        b[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
        b.extend_from_slice(&self.src_port.to_be_bytes());
        b.extend_from_slice(&self.dst_port.to_be_bytes());
        b.extend_from_slice(&(udp_len as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.payload);
        b
    }
}

/// A pcap file (nanosecond timestamps, Ethernet) of `frames`, in order.
pub fn write(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC_NS.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&SNAPLEN.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for f in frames {
        let b = f.to_ethernet();
        let sec = (f.t_ns / 1_000_000_000) as u32;
        let ns = (f.t_ns % 1_000_000_000) as u32;
        out.extend_from_slice(&sec.to_le_bytes());
        out.extend_from_slice(&ns.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&b);
    }
    out
}

/// What `read` found: the IPv4/UDP frames, and how many records were
/// something else (ARP, IPv6, TCP, fragments).
#[derive(Clone, Debug, Default)]
pub struct Capture {
    /// The frames, each with its record number (1-based, as Wireshark
    /// numbers frames).
    pub frames: Vec<(usize, Frame)>,
    /// Records that are not IPv4/UDP.
    pub skipped: usize,
}

/// Read a classic pcap file.
pub fn read(bytes: &[u8]) -> Result<Capture, PcapError> {
    let word = |off: usize, le: bool| -> Result<u32, PcapError> {
        let w: [u8; 4] = bytes
            .get(off..off + 4)
            .and_then(|s| s.try_into().ok())
            .ok_or(PcapError::Truncated)?;
        Ok(if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    let magic = word(0, true).map_err(|_| PcapError::NotPcap)?;
    let (le, ns) = match magic {
        MAGIC_US => (true, false),
        MAGIC_NS => (true, true),
        m if m.swap_bytes() == MAGIC_US => (false, false),
        m if m.swap_bytes() == MAGIC_NS => (false, true),
        _ => return Err(PcapError::NotPcap),
    };
    let linktype = word(20, le)? & 0xFFFF;
    let ethernet = match linktype {
        LINKTYPE_ETHERNET => true,
        l if LINKTYPE_RAW.contains(&l) => false,
        l => return Err(PcapError::LinkType(l)),
    };
    let mut cap = Capture::default();
    let mut off = 24;
    let mut n = 0;
    while off < bytes.len() {
        let sec = u64::from(word(off, le)?);
        let frac = u64::from(word(off + 4, le)?);
        let caplen = word(off + 8, le)? as usize;
        let rec = bytes
            .get(off + 16..off + 16 + caplen)
            .ok_or(PcapError::Truncated)?;
        off += 16 + caplen;
        n += 1;
        let t_ns = sec * 1_000_000_000 + if ns { frac } else { frac * 1000 };
        match parse_frame(rec, ethernet, t_ns) {
            Some(f) => cap.frames.push((n, f)),
            None => cap.skipped += 1,
        }
    }
    Ok(cap)
}

/// An IPv4/UDP frame's fields; None for anything else. A frame the capture
/// cut short keeps the payload bytes it has.
fn parse_frame(rec: &[u8], ethernet: bool, t_ns: u64) -> Option<Frame> {
    let (mut src_mac, mut dst_mac) = ([0u8; 6], [0u8; 6]);
    let mut ip = rec;
    if ethernet {
        dst_mac.copy_from_slice(rec.get(0..6)?);
        src_mac.copy_from_slice(rec.get(6..12)?);
        let mut at = 12;
        let mut etype = u16::from_be_bytes([*rec.get(at)?, *rec.get(at + 1)?]);
        if etype == ETH_P_8021Q {
            at += 4;
            etype = u16::from_be_bytes([*rec.get(at)?, *rec.get(at + 1)?]);
        }
        if etype != ETH_P_IP {
            return None;
        }
        ip = rec.get(at + 2..)?;
    }
    let vihl = *ip.first()?;
    let ihl = usize::from(vihl & 0x0F) * 4;
    let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
    if vihl >> 4 != 4 || ihl < IPV4_HLEN || *ip.get(9)? != 17 || frag & 0x3FFF != 0 {
        return None;
    }
    let udp = ip.get(ihl..)?;
    let udp_len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    let end = udp_len.max(UDP_HLEN).min(udp.len());
    Some(Frame {
        t_ns,
        src_mac,
        dst_mac,
        src: ip.get(12..16)?.try_into().ok()?,
        dst: ip.get(16..20)?.try_into().ok()?,
        ecn: ip.get(1)? & 3,
        src_port: u16::from_be_bytes([*udp.first()?, *udp.get(1)?]),
        dst_port: u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]),
        payload: udp.get(UDP_HLEN..end)?.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = Frame {
            t_ns: 1_234_567_890_123,
            src_mac: [2, 0, 0, 0, 1, 0],
            dst_mac: [2, 0, 0, 0, 0xfe, 0],
            src: [198, 18, 0, 1],
            dst: [198, 18, 0, 2],
            ecn: 2,
            src_port: 50000,
            dst_port: 4792,
            payload: vec![1, 2, 3, 4, 5],
        };
        let file = write(std::slice::from_ref(&f));
        let cap = read(&file).expect("read");
        assert_eq!(cap.skipped, 0);
        assert_eq!(cap.frames, vec![(1, f.clone())]);
        // The IPv4 header checksum verifies to zero.
        let eth = f.to_ethernet();
        assert_eq!(ipv4_checksum(&eth[14..34]), 0);
        assert_eq!(
            read(b"\x0a\x0d\x0d\x0a____").err(),
            Some(PcapError::NotPcap)
        );
    }
}
