//! One-line descriptions of MetaRoCE packets, in the words of the
//! Wireshark dissector's Info column (path as generation:slot).

use metaroce_engine::config::{PATH_SLOT_BITS, PATH_SLOT_MASK};
use metaroce_engine::wire::{
    parse_packet, DataHeader, Packet, FLAG_RETRANSMIT, MAX_PLANES, SACK_BITS,
};

/// `generation:slot` of a path id.
pub fn path(id: u16) -> String {
    format!("{}:{}", id >> PATH_SLOT_BITS, id & PATH_SLOT_MASK)
}

/// The PSNs a SACK bitmap names relative to `cum_psn` (bit i = cum + 1 + i),
/// as ranges: `+2,+5-7`.
pub fn sack(bits: &[u64; 4]) -> String {
    let set: Vec<usize> = (0..SACK_BITS)
        .filter(|&i| bits[i / 64] >> (i % 64) & 1 == 1)
        .collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < set.len() {
        let start = set[k];
        while k + 1 < set.len() && set[k + 1] == set[k] + 1 {
            k += 1;
        }
        out.push(if set[k] == start {
            format!("+{}", start + 1)
        } else {
            format!("+{}-{}", start + 1, set[k] + 1)
        });
        k += 1;
    }
    if out.is_empty() {
        "-".into()
    } else {
        out.join(",")
    }
}

/// A data header.
pub fn data(h: &DataHeader) -> String {
    format!(
        "{:?} path={} psn={} floor_delta={} msn={} off={} len={}/{} ts={}{}",
        h.opcode,
        path(h.path_id),
        h.psn,
        h.floor_delta,
        h.msn,
        h.offset,
        h.payload_len,
        h.msg_len,
        h.timestamp,
        if h.flags & FLAG_RETRANSMIT != 0 {
            " RETRANSMIT"
        } else {
            ""
        }
    )
}

/// A whole packet (the UDP payload).
pub fn packet(bytes: &[u8]) -> String {
    match parse_packet(bytes) {
        Ok(Packet::Data { header, .. }) => data(&header),
        Ok(Packet::Ack(a)) => format!(
            "ACK path={} cum_psn={} sack={} cum_msn={} ts_echo={}{}",
            path(a.path_id),
            a.cum_psn,
            sack(&a.sack),
            a.cum_msn,
            a.ts_echo,
            if a.ce { " CE" } else { "" }
        ),
        Ok(Packet::Nak(n)) => format!(
            "NAK path={} psn={} msn={} {:?}",
            path(n.path_id),
            n.psn,
            n.msn,
            n.syndrome
        ),
        Ok(Packet::Probe(p)) => format!("PROBE path={} seq={}", path(p.path_id), p.seq),
        Ok(Packet::ProbeReply(p)) => {
            format!("PROBE_REPLY path={} seq={}", path(p.path_id), p.seq)
        }
        Ok(Packet::Planes(p)) => format!(
            "PLANES src_qpn={:#x} count={}{}{}",
            p.src_qpn,
            p.count.min(MAX_PLANES as u8),
            if p.known { " KNOWN" } else { "" },
            if p.confirm { " CONFIRM" } else { "" }
        ),
        Err(e) => format!("invalid ({e:?}, {} bytes)", bytes.len()),
    }
}
