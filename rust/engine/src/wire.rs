//! MetaRoCE v1 wire format: encoding and validating decoding.
//!
//! All multi-byte fields are big-endian. Every packet is
//! `header [payload] ICRC`, where the 4-byte ICRC is CRC-32 over every byte
//! of the MetaRoCE header and payload (nothing of IP/UDP, whose TTL,
//! DSCP/ECN and checksum change in flight). Layouts are documented in
//! `Documentation/protocol.md`; the offsets below are the normative source.

use super::crc::{crc32, Crc32};

/// UDP destination port of MetaRoCE (RoCEv2 keeps 4791).
pub const UDP_PORT: u16 = 4792;
/// Protocol version carried in byte 0 of every packet.
pub const VERSION: u8 = 1;
/// Length of the data header (before the payload).
pub const DATA_HEADER_LEN: usize = 56;
/// Length of an ACK packet without ICRC.
pub const ACK_LEN: usize = 64;
/// Length of a NAK packet without ICRC.
pub const NAK_LEN: usize = 24;
/// Length of a PROBE / PROBE_REPLY packet without ICRC.
pub const PROBE_LEN: usize = 24;
/// Length of a PLANES packet without ICRC.
pub const PLANES_LEN: usize = 144;
/// Most planes a PLANES packet lists.
pub const MAX_PLANES: usize = 8;
/// Length of the trailing invariant CRC.
pub const ICRC_LEN: usize = 4;
/// Largest payload a v1 data packet may carry: 9 KiB, so that a plane of
/// jumbo frames (MTU 9000) carries its whole frame's worth (protocol.md
/// 1.3, 1.8).
pub const MAX_PAYLOAD: usize = 9216;
/// Width of the per-path SACK bitvector carried in ACKs.
pub const SACK_BITS: usize = 256;
/// Bytes an atomic operates on; payload of FETCH_ADD, ATOMIC_WRITE and
/// ATOMIC_RESP. The remote address must be a multiple of it.
pub const ATOMIC_LEN: u32 = 8;
/// Payload of CMP_SWAP: compare value, then swap value.
pub const ATOMIC_CMP_SWAP_LEN: u32 = 16;

/// Data flag: packet is a retransmission (informational only).
pub const FLAG_RETRANSMIT: u16 = 0x0001;
/// Data flag: immediate data field is valid (set exactly for *_IMM opcodes).
pub const FLAG_IMM: u16 = 0x0002;
/// Data flag: this direction's MSNs are numbered from the receiver's own
/// initial PSN, not the sender's: the sender answered requests before it
/// had an initial PSN of its own (a responder kept in RTR, protocol.md 2).
/// Reliable connected opcodes only.
pub const FLAG_PEER_PSN: u16 = 0x0004;
/// Data flag: the message is segmented at the payload size the QP's ends
/// agreed in their PLANES exchange, not at the path MTU (protocol.md 1.3,
/// 1.8). Reliable connected opcodes only.
pub const FLAG_WIDE: u16 = 0x0008;
/// UD_SEND carries the source QPN (24 bits) in `remote_va`.
pub const UD_SRC_QPN_MAX: u64 = 0xFF_FFFF;
/// All data flags defined by v1; other bits must be zero.
pub const DATA_FLAGS_MASK: u16 = FLAG_RETRANSMIT | FLAG_IMM | FLAG_PEER_PSN | FLAG_WIDE;
/// ACK flag: at least one acknowledged packet arrived with ECN-CE.
pub const ACK_FLAG_CE: u16 = 0x0001;
/// PLANES flag: the sender already holds the receiver's plane list.
pub const PLANES_FLAG_KNOWN: u16 = 0x0001;
/// PLANES flag: the sender has not yet seen a PLANES with `KNOWN` from the
/// receiver: answer with one (protocol.md 1.8).
pub const PLANES_FLAG_CONFIRM: u16 = 0x0002;

/// Packet opcode (byte 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    /// Two-sided send into the next receive buffer.
    Send = 0x01,
    /// Send with 32-bit immediate data.
    SendImm = 0x02,
    /// One-sided write to remote virtual address + rkey.
    Write = 0x03,
    /// Write with immediate data (consumes a receive at the responder).
    WriteImm = 0x04,
    /// Read request: one packet, no payload, `msg_len` bytes requested.
    ReadReq = 0x05,
    /// Read response data, a message in the responder's own send stream.
    ReadResp = 0x06,
    /// Unreliable datagram (UD/GSI): single packet, no ACK, no retransmission.
    UdSend = 0x07,
    /// Atomic compare-and-swap of the 8 bytes at `remote_va`: one packet,
    /// payload = compare value then swap value (two big-endian u64).
    CmpSwap = 0x08,
    /// Atomic fetch-and-add of the 8 bytes at `remote_va`: one packet,
    /// payload = the value to add (big-endian u64).
    FetchAdd = 0x09,
    /// Atomic 8-byte write at `remote_va`: one packet, payload = the 8 bytes
    /// to store, in memory order.
    AtomicWrite = 0x0A,
    /// Atomic response, a message in the responder's own send stream:
    /// payload = the 8 bytes' original value (big-endian u64), `imm` = MSN
    /// of the request.
    AtomicResp = 0x0B,
    /// Send that invalidates the responder's key `rkey` when it completes.
    SendInv = 0x0F,
    /// Per-path acknowledgement with SACK.
    Ack = 0x10,
    /// Negative acknowledgement with a syndrome.
    Nak = 0x11,
    /// Path probe / keepalive.
    Probe = 0x20,
    /// Reply to a path probe.
    ProbeReply = 0x21,
    /// The sending QP's device addresses, one per plane.
    Planes = 0x22,
}

impl Opcode {
    /// Decode an opcode byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::Send,
            0x02 => Self::SendImm,
            0x03 => Self::Write,
            0x04 => Self::WriteImm,
            0x05 => Self::ReadReq,
            0x06 => Self::ReadResp,
            0x07 => Self::UdSend,
            0x08 => Self::CmpSwap,
            0x09 => Self::FetchAdd,
            0x0A => Self::AtomicWrite,
            0x0B => Self::AtomicResp,
            0x0F => Self::SendInv,
            0x10 => Self::Ack,
            0x11 => Self::Nak,
            0x20 => Self::Probe,
            0x21 => Self::ProbeReply,
            0x22 => Self::Planes,
            _ => return None,
        })
    }

    /// True for opcodes that use the data header.
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Self::Send
                | Self::SendImm
                | Self::Write
                | Self::WriteImm
                | Self::ReadReq
                | Self::ReadResp
                | Self::UdSend
                | Self::CmpSwap
                | Self::FetchAdd
                | Self::AtomicWrite
                | Self::AtomicResp
                | Self::SendInv
        )
    }

    /// For the atomic requests (CMP_SWAP, FETCH_ADD, ATOMIC_WRITE) and the
    /// atomic response: the exact length of their one packet's payload
    /// (and of the message). `None` for every other opcode.
    pub fn atomic_len(self) -> Option<u32> {
        match self {
            Self::CmpSwap => Some(ATOMIC_CMP_SWAP_LEN),
            Self::FetchAdd | Self::AtomicWrite | Self::AtomicResp => Some(ATOMIC_LEN),
            _ => None,
        }
    }

    /// True for the requests answered by a message of the responder's own
    /// send stream (READ_REQ, CMP_SWAP, FETCH_ADD, ATOMIC_WRITE).
    pub fn expects_response(self) -> bool {
        matches!(
            self,
            Self::ReadReq | Self::CmpSwap | Self::FetchAdd | Self::AtomicWrite
        )
    }

    /// True for the responses (READ_RESP, ATOMIC_RESP): `imm` carries the
    /// MSN of the request they answer.
    pub fn is_response(self) -> bool {
        matches!(self, Self::ReadResp | Self::AtomicResp)
    }

    /// True for opcodes that carry immediate data.
    pub fn has_imm(self) -> bool {
        matches!(self, Self::SendImm | Self::WriteImm)
    }

    /// True for opcodes that carry a receive sequence number (`rsn`): the
    /// reliable messages that consume a posted receive buffer (SEND,
    /// SEND_IMM, SEND_INV, WRITE_IMM). Every other opcode sends `rsn = 0`.
    pub fn has_rsn(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendImm | Self::SendInv | Self::WriteImm
        )
    }

    /// True for reliable data opcodes (sequenced, acknowledged, retransmitted).
    pub fn is_reliable_data(self) -> bool {
        self.is_data() && self != Self::UdSend
    }
}

/// Why a packet was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Buffer shorter than the fixed header / declared lengths.
    Truncated,
    /// Buffer longer than header + payload + ICRC.
    TrailingBytes,
    /// Unknown version byte.
    BadVersion(u8),
    /// Unknown opcode byte.
    BadOpcode(u8),
    /// Opcode valid but not allowed in this position.
    WrongOpcode,
    /// Undefined flag bits set, or IMM flag inconsistent with opcode.
    BadFlags,
    /// A reserved field is non-zero.
    ReservedNonZero,
    /// Non-zero `rsn` on an opcode that does not consume a receive.
    BadRsn,
    /// Payload / offset / message length inconsistent.
    BadLength,
    /// Payload longer than `MAX_PAYLOAD`.
    PayloadTooLarge,
    /// Unknown NAK syndrome.
    BadSyndrome(u8),
    /// ICRC does not match.
    IcrcMismatch,
    /// Output buffer too small when encoding.
    BufferTooSmall,
}

/// NAK syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Syndrome {
    /// Bad rkey, bounds or permissions at the responder.
    RemoteAccess = 1,
    /// Responder failed to execute the operation.
    RemoteOperation = 2,
    /// Request malformed for this QP (e.g. no receive buffer large enough).
    InvalidRequest = 3,
}

impl Syndrome {
    /// Decode a syndrome byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::RemoteAccess,
            2 => Self::RemoteOperation,
            3 => Self::InvalidRequest,
            _ => return None,
        })
    }
}

fn rd<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N], WireError> {
    let end = off.checked_add(N).ok_or(WireError::Truncated)?;
    let s = buf.get(off..end).ok_or(WireError::Truncated)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Ok(a)
}
fn rd_u8(buf: &[u8], off: usize) -> Result<u8, WireError> {
    buf.get(off).copied().ok_or(WireError::Truncated)
}
fn rd_u16(buf: &[u8], off: usize) -> Result<u16, WireError> {
    Ok(u16::from_be_bytes(rd::<2>(buf, off)?))
}
fn rd_u32(buf: &[u8], off: usize) -> Result<u32, WireError> {
    Ok(u32::from_be_bytes(rd::<4>(buf, off)?))
}
fn rd_u64(buf: &[u8], off: usize) -> Result<u64, WireError> {
    Ok(u64::from_be_bytes(rd::<8>(buf, off)?))
}
fn wr(out: &mut [u8], off: usize, bytes: &[u8]) -> Result<(), WireError> {
    let end = off
        .checked_add(bytes.len())
        .ok_or(WireError::BufferTooSmall)?;
    out.get_mut(off..end)
        .ok_or(WireError::BufferTooSmall)?
        .copy_from_slice(bytes);
    Ok(())
}

/// Fields common to every packet: version, opcode, flags, destination QP.
fn common(buf: &[u8]) -> Result<(Opcode, u16, u32), WireError> {
    let ver = rd_u8(buf, 0)?;
    if ver != VERSION {
        return Err(WireError::BadVersion(ver));
    }
    let op_byte = rd_u8(buf, 1)?;
    let op = Opcode::from_u8(op_byte).ok_or(WireError::BadOpcode(op_byte))?;
    Ok((op, rd_u16(buf, 2)?, rd_u32(buf, 4)?))
}

fn write_common(out: &mut [u8], op: Opcode, flags: u16, qpn: u32) -> Result<(), WireError> {
    wr(out, 0, &[VERSION, op as u8])?;
    wr(out, 2, &flags.to_be_bytes())?;
    wr(out, 4, &qpn.to_be_bytes())
}

/// Data packet header (all data opcodes share one fixed 56-byte layout, so
/// every packet carries what direct placement needs even when it arrives
/// out of order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Opcode (a data opcode).
    pub opcode: Opcode,
    /// Data flags (`FLAG_*`).
    pub flags: u16,
    /// Destination queue pair number.
    pub dst_qpn: u32,
    /// Sender path identifier: generation (high 10 bits) | slot (low 6 bits).
    pub path_id: u16,
    /// `psn - floor`: every PSN on this path below `psn - floor_delta` is
    /// resolved at the sender (acknowledged or given up and resent elsewhere).
    pub floor_delta: u16,
    /// Per-path packet sequence number.
    pub psn: u32,
    /// Message sequence number (per QP direction).
    pub msn: u32,
    /// Byte offset of this payload inside the message.
    pub offset: u32,
    /// Total message length in bytes (READ_REQ: bytes requested).
    pub msg_len: u32,
    /// Payload bytes in this packet.
    pub payload_len: u16,
    /// Receive sequence number (SEND, SEND_IMM, WRITE_IMM): the number,
    /// mod 2^16, of this message among the QP direction's messages that
    /// consume a receive buffer (the first is 0), so the receiver binds the
    /// right buffer whatever order packets arrive in. 0 for other opcodes.
    pub rsn: u16,
    /// Remote virtual address of the message start (WRITE/READ_REQ), or of
    /// the 8 bytes an atomic request operates on; SEND part offset and
    /// `MORE` (large SENDs); source QPN (UD_SEND); else 0.
    pub remote_va: u64,
    /// Remote key (WRITE/READ_REQ/atomic requests), the key to invalidate
    /// (SEND_INV), or Q_Key for UD, else 0.
    pub rkey: u32,
    /// Immediate data (*_IMM, UD_SEND with `FLAG_IMM`), requester MSN
    /// (READ_RESP, ATOMIC_RESP), else 0.
    pub imm: u32,
    /// Sender timestamp in ns, echoed by ACKs for RTT measurement.
    pub timestamp: u64,
}

impl DataHeader {
    /// Validate and decode the header at the start of `buf` (payload and
    /// ICRC not checked; see [`parse_packet`] for a full packet).
    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() < DATA_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let (opcode, flags, dst_qpn) = common(buf)?;
        if !opcode.is_data() {
            return Err(WireError::WrongOpcode);
        }
        let h = Self {
            opcode,
            flags,
            dst_qpn,
            path_id: rd_u16(buf, 8)?,
            floor_delta: rd_u16(buf, 10)?,
            psn: rd_u32(buf, 12)?,
            msn: rd_u32(buf, 16)?,
            offset: rd_u32(buf, 20)?,
            msg_len: rd_u32(buf, 24)?,
            payload_len: rd_u16(buf, 28)?,
            rsn: rd_u16(buf, 30)?,
            remote_va: rd_u64(buf, 32)?,
            rkey: rd_u32(buf, 40)?,
            imm: rd_u32(buf, 44)?,
            timestamp: rd_u64(buf, 48)?,
        };
        h.validate()?;
        Ok(h)
    }

    /// Check field consistency (used by both encode and decode).
    pub fn validate(&self) -> Result<(), WireError> {
        if !self.opcode.is_data() {
            return Err(WireError::WrongOpcode);
        }
        if self.flags & !DATA_FLAGS_MASK != 0 {
            return Err(WireError::BadFlags);
        }
        let imm_flag = self.flags & FLAG_IMM != 0;
        // A datagram may carry immediate data or not.
        if imm_flag != self.opcode.has_imm() && self.opcode != Opcode::UdSend {
            return Err(WireError::BadFlags);
        }
        // A datagram belongs to no connection: it has no MSN start.
        // Nor a connection's agreed payload size.
        if self.flags & (FLAG_PEER_PSN | FLAG_WIDE) != 0 && self.opcode == Opcode::UdSend {
            return Err(WireError::BadFlags);
        }
        if self.payload_len as usize > MAX_PAYLOAD {
            return Err(WireError::PayloadTooLarge);
        }
        if self.floor_delta as usize > SACK_BITS {
            return Err(WireError::BadLength);
        }
        if self.rsn != 0 && !self.opcode.has_rsn() {
            return Err(WireError::BadRsn);
        }
        match self.opcode {
            Opcode::ReadReq => {
                if self.payload_len != 0 || self.offset != 0 {
                    return Err(WireError::BadLength);
                }
            }
            Opcode::UdSend => {
                if self.offset != 0 || u32::from(self.payload_len) != self.msg_len {
                    return Err(WireError::BadLength);
                }
                // `remote_va` is the 24-bit source QPN; `imm` is data only
                // with the IMM flag.
                if self.remote_va > UD_SRC_QPN_MAX || (!imm_flag && self.imm != 0) {
                    return Err(WireError::ReservedNonZero);
                }
            }
            Opcode::CmpSwap | Opcode::FetchAdd | Opcode::AtomicWrite | Opcode::AtomicResp => {
                let len = self.opcode.atomic_len();
                if self.offset != 0
                    || Some(self.msg_len) != len
                    || Some(u32::from(self.payload_len)) != len
                {
                    return Err(WireError::BadLength);
                }
            }
            _ => {
                let end = self
                    .offset
                    .checked_add(u32::from(self.payload_len))
                    .ok_or(WireError::BadLength)?;
                if end > self.msg_len {
                    return Err(WireError::BadLength);
                }
                // Only an empty message may have an empty packet.
                if self.payload_len == 0 && self.msg_len != 0 {
                    return Err(WireError::BadLength);
                }
            }
        }
        Ok(())
    }

    /// Encode the header into the first `DATA_HEADER_LEN` bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        self.validate()?;
        if out.len() < DATA_HEADER_LEN {
            return Err(WireError::BufferTooSmall);
        }
        write_common(out, self.opcode, self.flags, self.dst_qpn)?;
        wr(out, 8, &self.path_id.to_be_bytes())?;
        wr(out, 10, &self.floor_delta.to_be_bytes())?;
        wr(out, 12, &self.psn.to_be_bytes())?;
        wr(out, 16, &self.msn.to_be_bytes())?;
        wr(out, 20, &self.offset.to_be_bytes())?;
        wr(out, 24, &self.msg_len.to_be_bytes())?;
        wr(out, 28, &self.payload_len.to_be_bytes())?;
        wr(out, 30, &self.rsn.to_be_bytes())?;
        wr(out, 32, &self.remote_va.to_be_bytes())?;
        wr(out, 40, &self.rkey.to_be_bytes())?;
        wr(out, 44, &self.imm.to_be_bytes())?;
        wr(out, 48, &self.timestamp.to_be_bytes())?;
        Ok(DATA_HEADER_LEN)
    }
}

/// Encode a complete data packet (header, payload, ICRC). Returns its length.
pub fn encode_data_packet(
    header: &DataHeader,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, WireError> {
    if payload.len() != header.payload_len as usize {
        return Err(WireError::BadLength);
    }
    let n = header.encode(out)?;
    wr(out, n, payload)?;
    seal(out, n + payload.len())
}

/// Append the ICRC over `out[..len]`; returns the total packet length.
fn seal(out: &mut [u8], len: usize) -> Result<usize, WireError> {
    let body = out.get(..len).ok_or(WireError::BufferTooSmall)?;
    let icrc = crc32(body);
    wr(out, len, &icrc.to_be_bytes())?;
    Ok(len + ICRC_LEN)
}

/// Check the trailing ICRC of a packet whose non-ICRC part is `len` bytes.
fn check_icrc(buf: &[u8], len: usize) -> Result<(), WireError> {
    let total = len.checked_add(ICRC_LEN).ok_or(WireError::BadLength)?;
    if buf.len() < total {
        return Err(WireError::Truncated);
    }
    if buf.len() > total {
        return Err(WireError::TrailingBytes);
    }
    let body = buf.get(..len).ok_or(WireError::Truncated)?;
    let mut c = Crc32::new();
    c.update(body);
    if c.finish() != rd_u32(buf, len)? {
        return Err(WireError::IcrcMismatch);
    }
    Ok(())
}

/// Per-path acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// QP number of the data sender (destination of this ACK).
    pub dst_qpn: u32,
    /// Path being acknowledged (as carried in the data packets).
    pub path_id: u16,
    /// Some acknowledged packet since the previous ACK carried ECN-CE.
    pub ce: bool,
    /// Next PSN expected on the path: every PSN before it is received/resolved.
    pub cum_psn: u32,
    /// SACK: bit i (word i/64, bit i%64) set = PSN `cum_psn + 1 + i` received.
    pub sack: [u64; 4],
    /// Timestamp of the path's last data packet to arrive before this ACK
    /// (protocol.md 3.4).
    pub ts_echo: u64,
    /// Next message not yet fully received (all earlier MSNs are complete).
    pub cum_msn: u32,
    /// Receiver rate hint (RCN) for this QP in kbit/s; 0 = no hint.
    pub rate_hint_kbps: u32,
    /// Messages the receiver accepts outstanding (protocol.md 1.4); 0:
    /// not said, [`MSG_WINDOW_V1`](super::config::MSG_WINDOW_V1).
    pub msg_window: u16,
}

impl Ack {
    /// Encode the full ACK packet including ICRC.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        if out.len() < ACK_LEN + ICRC_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let flags = if self.ce { ACK_FLAG_CE } else { 0 };
        write_common(out, Opcode::Ack, flags, self.dst_qpn)?;
        wr(out, 8, &self.path_id.to_be_bytes())?;
        wr(out, 10, &self.msg_window.to_be_bytes())?;
        wr(out, 12, &self.cum_psn.to_be_bytes())?;
        let mut bytes = [0u8; 32];
        for (j, b) in bytes.iter_mut().enumerate() {
            let word = self.sack.get(j / 8).copied().unwrap_or(0);
            *b = (word >> ((j % 8) * 8)) as u8;
        }
        wr(out, 16, &bytes)?;
        wr(out, 48, &self.ts_echo.to_be_bytes())?;
        wr(out, 56, &self.cum_msn.to_be_bytes())?;
        wr(out, 60, &self.rate_hint_kbps.to_be_bytes())?;
        seal(out, ACK_LEN)
    }

    fn decode_body(buf: &[u8], flags: u16, dst_qpn: u32) -> Result<Self, WireError> {
        if flags & !ACK_FLAG_CE != 0 {
            return Err(WireError::BadFlags);
        }
        let bytes = rd::<32>(buf, 16)?;
        let mut sack = [0u64; 4];
        for (j, b) in bytes.iter().enumerate() {
            if let Some(w) = sack.get_mut(j / 8) {
                *w |= u64::from(*b) << ((j % 8) * 8);
            }
        }
        Ok(Self {
            dst_qpn,
            path_id: rd_u16(buf, 8)?,
            ce: flags & ACK_FLAG_CE != 0,
            cum_psn: rd_u32(buf, 12)?,
            sack,
            ts_echo: rd_u64(buf, 48)?,
            cum_msn: rd_u32(buf, 56)?,
            rate_hint_kbps: rd_u32(buf, 60)?,
            msg_window: rd_u16(buf, 10)?,
        })
    }
}

/// Negative acknowledgement: the message `msn` failed at the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nak {
    /// QP number of the data sender.
    pub dst_qpn: u32,
    /// Path of the offending packet.
    pub path_id: u16,
    /// Why it failed.
    pub syndrome: Syndrome,
    /// PSN of the offending packet.
    pub psn: u32,
    /// Message that failed.
    pub msn: u32,
}

impl Nak {
    /// Encode the full NAK packet including ICRC.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        if out.len() < NAK_LEN + ICRC_LEN {
            return Err(WireError::BufferTooSmall);
        }
        write_common(out, Opcode::Nak, 0, self.dst_qpn)?;
        wr(out, 8, &self.path_id.to_be_bytes())?;
        wr(out, 10, &[self.syndrome as u8, 0])?;
        wr(out, 12, &self.psn.to_be_bytes())?;
        wr(out, 16, &self.msn.to_be_bytes())?;
        wr(out, 20, &[0, 0, 0, 0])?;
        seal(out, NAK_LEN)
    }

    fn decode_body(buf: &[u8], flags: u16, dst_qpn: u32) -> Result<Self, WireError> {
        if flags != 0 {
            return Err(WireError::BadFlags);
        }
        if rd_u8(buf, 11)? != 0 || rd_u32(buf, 20)? != 0 {
            return Err(WireError::ReservedNonZero);
        }
        let s = rd_u8(buf, 10)?;
        Ok(Self {
            dst_qpn,
            path_id: rd_u16(buf, 8)?,
            syndrome: Syndrome::from_u8(s).ok_or(WireError::BadSyndrome(s))?,
            psn: rd_u32(buf, 12)?,
            msn: rd_u32(buf, 16)?,
        })
    }
}

/// Path probe (keepalive) and its reply; same layout, different opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// QP number at the destination of this packet.
    pub dst_qpn: u32,
    /// Path being probed.
    pub path_id: u16,
    /// Probe sequence number, echoed in the reply.
    pub seq: u32,
    /// Sender timestamp, echoed in the reply.
    pub timestamp: u64,
}

impl Probe {
    /// Encode a PROBE (`reply == false`) or PROBE_REPLY including ICRC.
    pub fn encode(&self, reply: bool, out: &mut [u8]) -> Result<usize, WireError> {
        if out.len() < PROBE_LEN + ICRC_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let op = if reply {
            Opcode::ProbeReply
        } else {
            Opcode::Probe
        };
        write_common(out, op, 0, self.dst_qpn)?;
        wr(out, 8, &self.path_id.to_be_bytes())?;
        wr(out, 10, &[0, 0])?;
        wr(out, 12, &self.seq.to_be_bytes())?;
        wr(out, 16, &self.timestamp.to_be_bytes())?;
        seal(out, PROBE_LEN)
    }

    fn decode_body(buf: &[u8], flags: u16, dst_qpn: u32) -> Result<Self, WireError> {
        if flags != 0 {
            return Err(WireError::BadFlags);
        }
        if rd_u16(buf, 10)? != 0 {
            return Err(WireError::ReservedNonZero);
        }
        Ok(Self {
            dst_qpn,
            path_id: rd_u16(buf, 8)?,
            seq: rd_u32(buf, 12)?,
            timestamp: rd_u64(buf, 16)?,
        })
    }
}

/// The addresses of a QP's device on each of its planes (section 1.8), so
/// the peer can reach it on planes other than the one it connected on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planes {
    /// QP number at the destination of this packet.
    pub dst_qpn: u32,
    /// The sending QP.
    pub src_qpn: u32,
    /// The sender already holds the receiver's plane list (stop repeating).
    pub known: bool,
    /// The sender asks for a PLANES back: it has not yet seen one with
    /// `known` from the receiver.
    pub confirm: bool,
    /// Number of entries of `addrs` that are meaningful (1..=`MAX_PLANES`).
    pub count: u8,
    /// Largest payload the sender's planes carry for this QP (bytes 14-15):
    /// each end segments at the smaller of the two when both advertise one
    /// above the path MTU (protocol.md 1.8); 0: none advertised.
    pub max_payload: u16,
    /// Address of plane i, as a GID (IPv4-mapped for IPv4); all zeros: the
    /// device has no usable plane i. Entries from `count` on are zero.
    pub addrs: [[u8; 16]; MAX_PLANES],
}

impl Planes {
    /// Encode the full PLANES packet including ICRC.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        if out.len() < PLANES_LEN + ICRC_LEN {
            return Err(WireError::BufferTooSmall);
        }
        if self.count == 0 || self.count as usize > MAX_PLANES {
            return Err(WireError::BadLength);
        }
        if self.addrs[self.count as usize..]
            .iter()
            .any(|a| *a != [0; 16])
        {
            return Err(WireError::ReservedNonZero);
        }
        let flags = if self.known { PLANES_FLAG_KNOWN } else { 0 }
            | if self.confirm { PLANES_FLAG_CONFIRM } else { 0 };
        write_common(out, Opcode::Planes, flags, self.dst_qpn)?;
        wr(out, 8, &self.src_qpn.to_be_bytes())?;
        wr(out, 12, &[self.count, 0])?;
        wr(out, 14, &self.max_payload.to_be_bytes())?;
        for (i, a) in self.addrs.iter().enumerate() {
            wr(out, 16 + 16 * i, a)?;
        }
        seal(out, PLANES_LEN)
    }

    fn decode_body(buf: &[u8], flags: u16, dst_qpn: u32) -> Result<Self, WireError> {
        if flags & !(PLANES_FLAG_KNOWN | PLANES_FLAG_CONFIRM) != 0 {
            return Err(WireError::BadFlags);
        }
        let count = rd_u8(buf, 12)?;
        if rd_u8(buf, 13)? != 0 {
            return Err(WireError::ReservedNonZero);
        }
        if count == 0 || count as usize > MAX_PLANES {
            return Err(WireError::BadLength);
        }
        let mut addrs = [[0u8; 16]; MAX_PLANES];
        for (i, a) in addrs.iter_mut().enumerate() {
            *a = rd::<16>(buf, 16 + 16 * i)?;
            if i >= count as usize && *a != [0; 16] {
                return Err(WireError::ReservedNonZero);
            }
        }
        Ok(Self {
            dst_qpn,
            src_qpn: rd_u32(buf, 8)?,
            known: flags & PLANES_FLAG_KNOWN != 0,
            confirm: flags & PLANES_FLAG_CONFIRM != 0,
            count,
            max_payload: u16::from_be_bytes(rd::<2>(buf, 14)?),
            addrs,
        })
    }
}

/// A fully validated packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// Data packet and its payload bytes.
    Data {
        /// The header.
        header: DataHeader,
        /// The payload (exactly `header.payload_len` bytes).
        payload: &'a [u8],
    },
    /// Acknowledgement.
    Ack(Ack),
    /// Negative acknowledgement.
    Nak(Nak),
    /// Path probe.
    Probe(Probe),
    /// Path probe reply.
    ProbeReply(Probe),
    /// The peer QP's plane addresses.
    Planes(Planes),
}

/// Parse and validate a whole MetaRoCE packet (the UDP payload), including
/// length consistency and ICRC. Never panics; every rejection has a reason.
pub fn parse_packet(buf: &[u8]) -> Result<Packet<'_>, WireError> {
    let (op, flags, qpn) = common(buf)?;
    match op {
        Opcode::Ack => {
            check_icrc(buf, ACK_LEN)?;
            Ok(Packet::Ack(Ack::decode_body(buf, flags, qpn)?))
        }
        Opcode::Nak => {
            check_icrc(buf, NAK_LEN)?;
            Ok(Packet::Nak(Nak::decode_body(buf, flags, qpn)?))
        }
        Opcode::Probe | Opcode::ProbeReply => {
            check_icrc(buf, PROBE_LEN)?;
            let p = Probe::decode_body(buf, flags, qpn)?;
            Ok(if op == Opcode::Probe {
                Packet::Probe(p)
            } else {
                Packet::ProbeReply(p)
            })
        }
        Opcode::Planes => {
            check_icrc(buf, PLANES_LEN)?;
            Ok(Packet::Planes(Planes::decode_body(buf, flags, qpn)?))
        }
        _ => {
            let header = DataHeader::decode(buf)?;
            let len = DATA_HEADER_LEN + header.payload_len as usize;
            check_icrc(buf, len)?;
            let payload = buf.get(DATA_HEADER_LEN..len).ok_or(WireError::Truncated)?;
            Ok(Packet::Data { header, payload })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DataHeader {
        DataHeader {
            opcode: Opcode::WriteImm,
            flags: FLAG_IMM,
            dst_qpn: 0x11,
            path_id: (3 << 6) | 5,
            floor_delta: 2,
            psn: 0xFFFF_FFFE,
            msn: 7,
            offset: 4096,
            msg_len: 10000,
            payload_len: 16,
            rsn: 0xFFFF,
            remote_va: 0xDEAD_0000,
            rkey: 0x42,
            imm: 0xABCD,
            timestamp: 123_456,
        }
    }

    #[test]
    fn data_roundtrip() {
        let h = sample();
        let payload = [7u8; 16];
        let mut buf = [0u8; 128];
        let n = encode_data_packet(&h, &payload, &mut buf).unwrap();
        assert_eq!(n, DATA_HEADER_LEN + 16 + ICRC_LEN);
        match parse_packet(&buf[..n]).unwrap() {
            Packet::Data { header, payload: p } => {
                assert_eq!(header, h);
                assert_eq!(p, &payload);
            }
            _ => panic!("wrong kind"),
        }
        assert_corruption_caught(&buf[..n]);
    }

    /// SEND_INV: a receive-consuming data opcode (0x0F) whose `rkey` is the
    /// responder's key to invalidate, carried through encode and parse; no
    /// immediate (the IMM flag is refused on it).
    #[test]
    fn send_inv_roundtrip() {
        assert_eq!(Opcode::from_u8(0x0F), Some(Opcode::SendInv));
        assert_eq!(Opcode::SendInv as u8, 0x0F);
        assert!(Opcode::SendInv.is_reliable_data() && Opcode::SendInv.has_rsn());
        assert!(!Opcode::SendInv.has_imm());
        let h = DataHeader {
            opcode: Opcode::SendInv,
            flags: 0,
            remote_va: 0,
            rkey: 0x1234_56AB,
            imm: 0,
            rsn: 9,
            ..sample()
        };
        let payload = [3u8; 16];
        let mut buf = [0u8; 128];
        let n = encode_data_packet(&h, &payload, &mut buf).unwrap();
        assert_eq!(buf[1], 0x0F);
        assert_eq!(&buf[40..44], &0x1234_56ABu32.to_be_bytes());
        match parse_packet(&buf[..n]).unwrap() {
            Packet::Data { header, .. } => assert_eq!(header, h),
            _ => panic!("wrong kind"),
        }
        assert_corruption_caught(&buf[..n]);
        let imm = DataHeader {
            flags: FLAG_IMM,
            ..h
        };
        assert_eq!(imm.encode(&mut buf), Err(WireError::BadFlags));
    }

    fn ud_header(imm: Option<u32>) -> DataHeader {
        DataHeader {
            opcode: Opcode::UdSend,
            flags: if imm.is_some() { FLAG_IMM } else { 0 },
            dst_qpn: 0x15,
            path_id: 0,
            floor_delta: 0,
            psn: 3,
            msn: 3,
            offset: 0,
            msg_len: 24,
            payload_len: 24,
            rsn: 0,
            remote_va: 0xAB_CDEF,
            rkey: 0x1111_1111,
            imm: imm.unwrap_or(0),
            timestamp: 9,
        }
    }

    /// UD_SEND: the source QPN in `remote_va`, immediate data in `imm`
    /// with `FLAG_IMM` (section 5); a QPN wider than 24 bits, or `imm`
    /// without the flag, is rejected.
    #[test]
    fn ud_send_source_qpn_and_immediate() {
        let payload = [3u8; 24];
        for imm in [None, Some(0), Some(0xDEAD_BEEF)] {
            let h = ud_header(imm);
            let mut buf = [0u8; 128];
            let n = encode_data_packet(&h, &payload, &mut buf).unwrap();
            assert_eq!(&buf[32..40], &0xAB_CDEFu64.to_be_bytes());
            assert_eq!(&buf[44..48], &imm.unwrap_or(0).to_be_bytes());
            match parse_packet(&buf[..n]).unwrap() {
                Packet::Data { header, payload: p } => {
                    assert_eq!(header, h);
                    assert_eq!(header.flags & FLAG_IMM != 0, imm.is_some());
                    assert_eq!(p, &payload);
                }
                _ => panic!("wrong kind"),
            }
            assert_corruption_caught(&buf[..n]);
        }
        let wide = DataHeader {
            remote_va: UD_SRC_QPN_MAX + 1,
            ..ud_header(None)
        };
        assert_eq!(wide.validate(), Err(WireError::ReservedNonZero));
        let stray = DataHeader {
            imm: 5,
            ..ud_header(None)
        };
        assert_eq!(stray.validate(), Err(WireError::ReservedNonZero));
        // Other opcodes still need the flag exactly when they carry imm.
        let send = DataHeader {
            opcode: Opcode::Send,
            flags: FLAG_IMM,
            remote_va: 0,
            rkey: 0,
            ..ud_header(None)
        };
        assert_eq!(send.validate(), Err(WireError::BadFlags));
    }

    /// Any single bit flip of the encoded packet `pkt`, and every
    /// truncation of it, is rejected by the parser.
    fn assert_corruption_caught(pkt: &[u8]) {
        let mut b = [0u8; 2048];
        let b = &mut b[..pkt.len()];
        for i in 0..pkt.len() * 8 {
            b.copy_from_slice(pkt);
            b[i / 8] ^= 1 << (i % 8);
            assert!(parse_packet(b).is_err(), "bit {i}");
        }
        for l in 0..pkt.len() {
            assert!(parse_packet(&pkt[..l]).is_err(), "truncated to {l}");
        }
    }

    fn atomic_header(opcode: Opcode) -> DataHeader {
        let len = opcode.atomic_len().unwrap();
        DataHeader {
            opcode,
            flags: 0,
            dst_qpn: 0x11,
            path_id: (3 << 6) | 5,
            floor_delta: 1,
            psn: 77,
            msn: 9,
            offset: 0,
            msg_len: len,
            payload_len: len as u16,
            rsn: 0,
            remote_va: if opcode == Opcode::AtomicResp {
                0
            } else {
                0x7f00_1238
            },
            rkey: if opcode == Opcode::AtomicResp {
                0
            } else {
                0x4201
            },
            imm: if opcode == Opcode::AtomicResp { 8 } else { 0 },
            timestamp: 55,
        }
    }

    /// Each atomic opcode round-trips with its operands, every corruption
    /// is caught, and the parser holds each to its one operand length.
    #[test]
    fn atomic_roundtrip_and_lengths() {
        for op in [
            Opcode::CmpSwap,
            Opcode::FetchAdd,
            Opcode::AtomicWrite,
            Opcode::AtomicResp,
        ] {
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert!(op.is_reliable_data() && !op.has_imm() && !op.has_rsn());
            assert_eq!(op.expects_response(), op != Opcode::AtomicResp);
            assert_eq!(op.is_response(), op == Opcode::AtomicResp);
            let h = atomic_header(op);
            let mut operands = [0u8; 16];
            for (i, b) in operands.iter_mut().enumerate() {
                *b = 0xA0 + i as u8;
            }
            let payload = &operands[..h.payload_len as usize];
            let mut buf = [0u8; 128];
            let n = encode_data_packet(&h, payload, &mut buf).unwrap();
            assert_eq!(n, DATA_HEADER_LEN + payload.len() + ICRC_LEN);
            assert_eq!(buf[1], op as u8);
            match parse_packet(&buf[..n]).unwrap() {
                Packet::Data { header, payload: p } => {
                    assert_eq!(header, h);
                    assert_eq!(p, payload);
                }
                _ => panic!("wrong kind"),
            }
            assert_corruption_caught(&buf[..n]);
            // Other lengths, a non-zero offset, immediate or rsn: refused
            // by the encoder and by the parser.
            let len = h.msg_len;
            for (msg_len, payload_len, offset) in [
                (len + 8, len + 8, 0),
                (len - 4, len - 4, 0),
                (len, 0, 0),
                (len, len, 8),
                (24, 8, 16),
            ] {
                let bad = DataHeader {
                    msg_len,
                    payload_len: payload_len as u16,
                    offset,
                    ..h
                };
                assert_eq!(
                    bad.validate(),
                    Err(WireError::BadLength),
                    "{op:?} {msg_len} {payload_len}"
                );
                let mut body = [0u8; 128];
                body[..DATA_HEADER_LEN].copy_from_slice(&buf[..DATA_HEADER_LEN]);
                body[20..24].copy_from_slice(&offset.to_be_bytes());
                body[24..28].copy_from_slice(&msg_len.to_be_bytes());
                body[28..30].copy_from_slice(&(payload_len as u16).to_be_bytes());
                let l = DATA_HEADER_LEN + payload_len as usize;
                let total = seal(&mut body, l).unwrap();
                assert_eq!(parse_packet(&body[..total]), Err(WireError::BadLength));
            }
            let bad = DataHeader {
                flags: FLAG_IMM,
                ..h
            };
            assert_eq!(bad.validate(), Err(WireError::BadFlags));
            let bad = DataHeader { rsn: 1, ..h };
            assert_eq!(bad.validate(), Err(WireError::BadRsn));
        }
        // The values between the data opcodes and ACK (SEND_INV, 0x0F,
        // aside) stay unassigned.
        for v in 0x0C..0x0F {
            assert_eq!(Opcode::from_u8(v), None);
        }
    }

    #[test]
    fn control_roundtrip() {
        let mut buf = [0u8; 128];
        let ack = Ack {
            dst_qpn: 9,
            path_id: 77,
            ce: true,
            cum_psn: 1000,
            sack: [1, 1 << 63, 0x55, u64::MAX],
            ts_echo: 5,
            cum_msn: 3,
            rate_hint_kbps: 200_000_000,
            msg_window: 1024,
        };
        let n = ack.encode(&mut buf).unwrap();
        assert_eq!(&buf[10..12], &[0x04, 0x00], "msg_window at offset 10");
        assert_eq!(parse_packet(&buf[..n]), Ok(Packet::Ack(ack)));
        let nak = Nak {
            dst_qpn: 1,
            path_id: 2,
            syndrome: Syndrome::RemoteAccess,
            psn: 3,
            msn: 4,
        };
        let n = nak.encode(&mut buf).unwrap();
        assert_eq!(parse_packet(&buf[..n]), Ok(Packet::Nak(nak)));
        let p = Probe {
            dst_qpn: 1,
            path_id: 2,
            seq: 3,
            timestamp: 4,
        };
        let n = p.encode(true, &mut buf).unwrap();
        assert_eq!(parse_packet(&buf[..n]), Ok(Packet::ProbeReply(p)));
    }

    fn sample_planes() -> Planes {
        let mut addrs = [[0u8; 16]; MAX_PLANES];
        addrs[0] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1];
        addrs[2] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 2, 1];
        Planes {
            dst_qpn: 0x12,
            src_qpn: 0x34,
            known: true,
            confirm: false,
            count: 3,
            max_payload: 0,
            addrs,
        }
    }

    #[test]
    fn planes_roundtrip_and_corruption() {
        let p = sample_planes();
        let mut buf = [0u8; 200];
        let n = p.encode(&mut buf).unwrap();
        assert_eq!(n, PLANES_LEN + ICRC_LEN);
        assert_eq!(parse_packet(&buf[..n]), Ok(Packet::Planes(p)));
        let q = Planes {
            known: false,
            confirm: true,
            count: MAX_PLANES as u8,
            max_payload: 8912,
            ..p
        };
        let m = q.encode(&mut buf).unwrap();
        assert_eq!(buf[14..16], 8912u16.to_be_bytes());
        assert_eq!(parse_packet(&buf[..m]), Ok(Packet::Planes(q)));
        let n = p.encode(&mut buf).unwrap();
        // Any single bit flip is caught, every truncation and extension too.
        assert_corruption_caught(&buf[..n]);
        assert_eq!(parse_packet(&buf[..n + 1]), Err(WireError::TrailingBytes));
    }

    /// The same packet as built by selftests/metaroce_pkt.py (written from
    /// the spec, independently): header bytes and ICRC agree.
    #[test]
    fn planes_known_answer() {
        let mut buf = [0u8; PLANES_LEN + ICRC_LEN];
        sample_planes().encode(&mut buf).unwrap();
        assert_eq!(
            buf[..16],
            [1, 0x22, 0, 1, 0, 0, 0, 0x12, 0, 0, 0, 0x34, 3, 0, 0, 0]
        );
        assert_eq!(buf[PLANES_LEN..], [0xcb, 0x53, 0xc7, 0xd4]);
    }

    /// Re-seals `body` (a PLANES packet without ICRC) and parses it.
    fn parse_resealed(mut body: [u8; PLANES_LEN + ICRC_LEN]) -> Result<(), WireError> {
        seal(&mut body, PLANES_LEN).unwrap();
        parse_packet(&body).map(|_| ())
    }

    #[test]
    fn planes_rejects_bad_fields() {
        let mut buf = [0u8; PLANES_LEN + ICRC_LEN];
        sample_planes().encode(&mut buf).unwrap();
        // Count 0 and count above MAX_PLANES.
        for c in [0u8, MAX_PLANES as u8 + 1, 255] {
            let mut b = buf;
            b[12] = c;
            assert_eq!(parse_resealed(b), Err(WireError::BadLength), "count {c}");
        }
        // The reserved byte, undefined flags, an address past `count`.
        let mut b = buf;
        b[13] = 1;
        assert_eq!(parse_resealed(b), Err(WireError::ReservedNonZero));
        let mut b = buf;
        b[3] |= 4;
        assert_eq!(parse_resealed(b), Err(WireError::BadFlags));
        let mut b = buf;
        b[16 + 16 * 3 + 15] = 9;
        assert_eq!(parse_resealed(b), Err(WireError::ReservedNonZero));
        // The encoder refuses what the parser would reject.
        let mut p = sample_planes();
        p.count = 0;
        assert_eq!(p.encode(&mut buf), Err(WireError::BadLength));
        let mut p = sample_planes();
        p.count = 2;
        assert_eq!(p.encode(&mut buf), Err(WireError::ReservedNonZero));
        assert_eq!(
            sample_planes().encode(&mut buf[..PLANES_LEN]),
            Err(WireError::BufferTooSmall)
        );
    }

    /// Deterministic pseudo-random inputs: the parser never panics and
    /// accepts only what re-encodes to the same bytes.
    #[test]
    fn planes_parse_random_bytes() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut good = [0u8; PLANES_LEN + ICRC_LEN];
        sample_planes().encode(&mut good).unwrap();
        for round in 0..20_000 {
            let mut b = good;
            // A few random bytes changed, then (half the time) re-sealed so
            // the ICRC does not hide field checks.
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % PLANES_LEN;
                b[i] = next() as u8;
            }
            if round % 2 == 0 {
                seal(&mut b, PLANES_LEN).unwrap();
            }
            if let Ok(Packet::Planes(p)) = parse_packet(&b) {
                let mut again = [0u8; PLANES_LEN + ICRC_LEN];
                p.encode(&mut again).unwrap();
                assert_eq!(again, b);
            }
        }
    }

    #[test]
    fn rejects_inconsistent_headers() {
        let mut h = sample();
        h.offset = 9990;
        assert_eq!(h.validate(), Err(WireError::BadLength));
        let mut h = sample();
        h.flags = 0;
        assert_eq!(h.validate(), Err(WireError::BadFlags));
        let mut h = sample();
        h.offset = u32::MAX;
        assert_eq!(h.validate(), Err(WireError::BadLength));
        // rsn only on receive-consuming opcodes, on the wire too.
        let mut h = sample();
        h.opcode = Opcode::Write;
        h.flags = 0;
        assert_eq!(h.validate(), Err(WireError::BadRsn));
        let mut buf = [0u8; 128];
        assert_eq!(
            encode_data_packet(&h, &[0; 16], &mut buf),
            Err(WireError::BadRsn)
        );
        h.rsn = 0;
        let n = encode_data_packet(&h, &[0; 16], &mut buf).unwrap();
        buf[31] = 1;
        assert_eq!(parse_packet(&buf[..n]), Err(WireError::BadRsn));
        assert_eq!(parse_packet(&[2, 1]), Err(WireError::BadVersion(2)));
        assert_eq!(parse_packet(&[1, 0x99]), Err(WireError::BadOpcode(0x99)));
        assert_eq!(parse_packet(&[]), Err(WireError::Truncated));
    }
}
