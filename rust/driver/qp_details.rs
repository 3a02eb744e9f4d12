// SPDX-License-Identifier: GPL-2.0

//! What `rdma resource show qp -dd` (or `-j -dd`) shows of an RC or UC QP
//! beyond the core's fields: the sender's window over all its paths and
//! each path's own state (protocol.md 2 and 4), so that the share a plane
//! carries, a path's window and RTT, and where losses and timeouts fall can
//! be read off a running QP.
//!
//! Names: `paths`, `active_paths`, `qwnd` (packets), `inflight`,
//! `outstanding` (messages), `msg_window` (messages the peer's receiver
//! accepts outstanding, protocol.md 1.4), `rate_hint_kbps` (the peer's
//! hint this QP's sender obeys, kbit/s, 0: none), `rx_rate_hint_kbps` (the
//! hint this QP's ACKs carry while it receives, kbit/s, protocol.md 6.5; a
//! QP that stopped keeps its last, its next ACK takes the newcomer's
//! share, `rcn.rs`), `payload` (bytes a
//! packet of the messages posted now carries: the agreed size, or the path
//! MTU), `agreed_payload` (the size agreed with the peer, 0 for none,
//! protocol.md 1.8), `sent` and `retx` (data packets the QP sent since it
//! connected, retransmissions included, and of them retransmissions: its
//! paths' counts, the closed ones' too), `base_rtt_us` (the RTT the
//! sender's queueing delay is measured from, protocol.md 6.3; 0 before the
//! first sample), `delay_floor_us` (the RTT a delay trial found the QP's
//! cuts do not lower, which is not read as queueing either; 0 for none),
//! then for each path in use,
//! by slot `K`: `pK_plane`, `pK_sport`, `pK_state`, `pK_cwnd` (packets),
//! `pK_srtt_us`, `pK_rttvar_us`, `pK_min_rtt_us`, `pK_inflight`, `pK_span`
//! (PSNs from the path's floor to its next: in flight, acknowledged above
//! a hole, or lost and not yet passed), and since the path opened
//! `pK_sent` (data packets, retransmissions included), `pK_retx` (of them
//! retransmissions), `pK_lost` (declared lost from SACK holes), `pK_rtos`
//! (retransmission timeouts), `pK_acks` (ACKs that acknowledged something:
//! with `pK_sent`, how far the peer coalesces them), `pK_tail_probes`. The
//! core's message for one QP has room for about six paths, and a dump of
//! all QPs shares each message among several: the paths that do not fit
//! are left out whole, `paths` still counts them and `sent` and `retx`
//! still count their packets.

use kernel::c_str;
use kernel::prelude::*;

use crate::engine::path::{PathState, TxPath};
use crate::engine::receiver::Receiver;
use crate::engine::sender::Sender;
use crate::ib::restrack::Details;

/// Writes the details of a QP whose engines are `sender` and `receiver`.
pub(crate) fn write(sender: &Sender, receiver: &Receiver, out: &mut Details<'_>) -> Result {
    out.u32(format_args!("paths"), count(sender.path_count()))?;
    out.u32(format_args!("active_paths"), count(sender.active_paths()))?;
    out.u32(format_args!("qwnd"), sender.qwnd())?;
    out.u32(format_args!("inflight"), sender.inflight())?;
    out.u32(format_args!("outstanding"), sender.outstanding())?;
    out.u32(format_args!("msg_window"), count(sender.msg_window()))?;
    out.u32(format_args!("rate_hint_kbps"), sender.rate_hint_kbps())?;
    out.u32(format_args!("rx_rate_hint_kbps"), receiver.rate_hint_kbps())?;
    out.u32(format_args!("payload"), sender.payload())?;
    out.u32(format_args!("agreed_payload"), receiver.payload())?;
    out.u64(format_args!("sent"), sender.stats().data_packets)?;
    out.u64(format_args!("retx"), sender.stats().retransmits)?;
    out.u64(format_args!("base_rtt_us"), sender.base_rtt() / 1000)?;
    out.u64(format_args!("delay_floor_us"), sender.delay_floor() / 1000)?;
    for p in sender.used_paths() {
        if out.group(|g| write_path(g, p)).is_err() {
            // No room for this path: it and the rest are left out.
            break;
        }
    }
    Ok(())
}

fn write_path(g: &mut Details<'_>, p: &TxPath) -> Result {
    let k = p.slot();
    g.u32(format_args!("p{k}_plane"), p.plane.into())?;
    g.u32(format_args!("p{k}_sport"), p.src_port.into())?;
    g.str(format_args!("p{k}_state"), state_name(p.state))?;
    g.u32(format_args!("p{k}_cwnd"), p.cc.window())?;
    g.u64(format_args!("p{k}_srtt_us"), p.rtt.srtt / 1000)?;
    g.u64(format_args!("p{k}_rttvar_us"), p.rtt.rttvar / 1000)?;
    g.u64(format_args!("p{k}_min_rtt_us"), p.rtt.min_rtt / 1000)?;
    g.u32(format_args!("p{k}_inflight"), p.inflight)?;
    g.u32(format_args!("p{k}_span"), p.next_psn.wrapping_sub(p.una))?;
    g.u64(format_args!("p{k}_sent"), p.sent)?;
    g.u64(format_args!("p{k}_retx"), p.retransmitted)?;
    g.u64(format_args!("p{k}_lost"), p.sack_lost)?;
    g.u64(format_args!("p{k}_rtos"), p.rtos)?;
    g.u64(format_args!("p{k}_acks"), p.acks)?;
    g.u64(format_args!("p{k}_tail_probes"), p.tail_probes)
}

fn state_name(s: PathState) -> &'static CStr {
    match s {
        PathState::Unused => c_str!("unused"),
        PathState::Active => c_str!("active"),
        PathState::Probing => c_str!("probing"),
        PathState::Suspended => c_str!("suspended"),
    }
}

/// A count (of paths, at most `MAX_PATHS`; of messages, at most
/// `MSG_WINDOW_MAX`) as the u32 netlink carries.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
