//! The engine when its heap refuses memory (a kernel's atomic allocation
//! failing under pressure): a path stays closed, a packet waits for the
//! retry timer or is dropped unacknowledged, nothing is half-recorded, and
//! everything goes on once memory is back.

use std::cell::Cell;
use std::mem::size_of;

use metaroce_engine::bitmap::PktBitmap;
use metaroce_engine::cc::Aimd;
use metaroce_engine::config::{ConfigError, ReceiverConfig, SenderConfig};
use metaroce_engine::events::{EventQueue, FailCause, SenderEvent};
use metaroce_engine::heap::{Empty, Heap};
use metaroce_engine::path::{PathRing, TxPath};
use metaroce_engine::receiver::{DropReason, Receiver, RxVerdict};
use metaroce_engine::sender::{Message, PostError, Sender, TxKind, ALLOC_RETRY_NS};
use metaroce_engine::wire::{DataHeader, Opcode};

thread_local! {
    /// Sizes of the records the heap refuses now (0: any).
    static REFUSED: Cell<[usize; 3]> = const { Cell::new([usize::MAX; 3]) };
    /// The heap refuses message windows (`Heap::empty`) now.
    static NO_WINDOWS: Cell<bool> = const { Cell::new(false) };
}

fn refuse(sizes: [usize; 3]) {
    REFUSED.with(|r| r.set(sizes));
}

fn refuse_windows(no: bool) {
    NO_WINDOWS.with(|w| w.set(no));
}

fn allow_all() {
    refuse([usize::MAX; 3]);
    refuse_windows(false);
}

/// A heap that refuses the records whose sizes are set in `REFUSED`.
struct Tight;

impl Heap for Tight {
    type Box<T> = Box<T>;

    fn copy_of<T: Copy>(init: &T) -> Option<Box<T>> {
        let n = size_of::<T>();
        let refused = REFUSED.with(|r| r.get());
        (!refused.iter().any(|&s| s == 0 || s == n)).then(|| Box::new(*init))
    }

    fn empty<T: Empty>() -> Option<Box<T>> {
        let refused = REFUSED.with(|r| r.get()).contains(&0) || NO_WINDOWS.with(|w| w.get());
        (!refused).then(|| Box::new(T::EMPTY))
    }
}

const MTU: u32 = 1000;

fn sender(paths: u16) -> Result<Sender<Aimd, Tight>, ConfigError> {
    Sender::with_cc(
        SenderConfig {
            mtu: MTU,
            initial_paths: paths,
            max_paths: paths,
            // Whole windows before the first ACK: the tests send several
            // messages' packets with none.
            first_flight: 0,
            ..SenderConfig::DEFAULT
        },
        Aimd,
        0,
    )
}

fn write(pkts: u32) -> Message {
    Message {
        opcode: Opcode::Write,
        len: pkts * MTU,
        remote_va: 0x1000,
        rkey: 1,
        imm: 0,
        rsn: 0,
    }
}

fn data(tx: &mut Sender<Aimd, Tight>, now: u64) -> Option<DataHeader> {
    match tx.next_packet(now)?.kind {
        TxKind::Data { header, .. } => Some(header),
        TxKind::Probe(_) => None,
    }
}

#[test]
fn no_memory_for_any_path_refuses_the_connection() {
    refuse([0; 3]);
    assert_eq!(sender(4).err(), Some(ConfigError::NoMemory));
    allow_all();
    assert_eq!(sender(4).unwrap().path_count(), 4);
}

#[test]
fn a_path_without_its_ring_waits_for_the_retry_timer() {
    refuse([size_of::<PathRing>(); 3]);
    let mut tx = sender(2).unwrap();
    assert_eq!(tx.path_count(), 2, "paths open without their rings");
    tx.post(&write(2)).unwrap();
    let idle = tx.footprint();
    assert!(tx.next_packet(10).is_none(), "no ring, nothing sent");
    assert!(tx.has_ready(), "the message still waits to be sent");
    assert_eq!(tx.next_deadline(), Some(10 + ALLOC_RETRY_NS));
    assert_eq!(tx.footprint(), idle);
    allow_all();
    tx.on_timer(10 + ALLOC_RETRY_NS);
    assert_eq!(tx.next_deadline(), None, "retry done, nothing in flight");
    let a = data(&mut tx, 20).unwrap();
    let b = data(&mut tx, 20).unwrap();
    assert_ne!(a.path_id, b.path_id, "both paths carry data once they may");
    assert!(tx.footprint() > idle);
}

#[test]
fn no_memory_for_the_message_window_queues_nothing() {
    allow_all();
    let mut tx = sender(2).unwrap();
    let idle = tx.footprint();
    refuse_windows(true);
    assert_eq!(tx.post(&write(2)), Err(PostError::NoMemory));
    assert_eq!(tx.outstanding(), 0);
    assert!(!tx.has_ready());
    assert!(tx.next_packet(0).is_none());
    assert_eq!(tx.footprint(), idle, "nothing taken");
    // Memory back: the same message is the first, numbered as it would
    // have been, and sent.
    allow_all();
    let first = sender(2).unwrap().post(&write(2)).unwrap();
    assert_eq!(tx.post(&write(2)), Ok(first));
    assert!(tx.footprint() > idle, "the window is taken");
    assert!(data(&mut tx, 1).is_some());
}

#[test]
fn a_long_message_without_its_bitmaps_waits_and_short_ones_need_none() {
    refuse([size_of::<PktBitmap>(); 3]);
    let mut tx = sender(2).unwrap();
    tx.post(&write(3)).unwrap();
    for _ in 0..3 {
        assert!(
            data(&mut tx, 0).is_some(),
            "a short message needs no bitmap"
        );
    }
    tx.post(&write(65)).unwrap();
    assert!(tx.next_packet(5).is_none());
    assert_eq!(
        tx.next_deadline().map(|d| d >= 5 + ALLOC_RETRY_NS),
        Some(true)
    );
    allow_all();
    tx.on_timer(5 + ALLOC_RETRY_NS);
    let h = data(&mut tx, 5 + ALLOC_RETRY_NS).unwrap();
    assert_eq!((h.msn, h.offset), (1, 0));
}

fn header(msn: u32, pkt: u32, pkts: u32, psn: u32) -> DataHeader {
    DataHeader {
        opcode: Opcode::Write,
        flags: 0,
        dst_qpn: 1,
        path_id: 0,
        floor_delta: 0,
        psn,
        msn,
        offset: pkt * MTU,
        msg_len: pkts * MTU,
        payload_len: MTU as u16,
        rsn: 0,
        remote_va: 0x1000,
        rkey: 1,
        imm: 0,
        timestamp: 1,
    }
}

#[test]
fn a_receiver_without_memory_drops_without_a_trace() {
    let mut rx = Receiver::<Tight>::EMPTY;
    rx.reset(ReceiverConfig {
        peer_qpn: 1,
        mtu: MTU,
    })
    .unwrap();
    // No memory for the path: dropped, nothing to acknowledge.
    refuse([0; 3]);
    let first = header(0, 0, 1, 0);
    assert_eq!(
        rx.on_data(&first, false, 0),
        RxVerdict::Drop(DropReason::NoMemory)
    );
    assert!(rx.ack_for(0).is_none());
    // The path's memory, but none for the message window (the QP's first
    // data packet): dropped the same way.
    allow_all();
    refuse_windows(true);
    assert_eq!(
        rx.on_data(&first, false, 0),
        RxVerdict::Drop(DropReason::NoMemory)
    );
    assert!(rx.ack_for(0).is_none(), "the path saw nothing");
    assert_eq!(rx.pop_completion(), None);
    // The path's memory, but none for a long message's bitmap: its packet
    // is not recorded on the path either (an ACK would have told the
    // sender it arrived).
    refuse([size_of::<PktBitmap>(); 3]);
    let long = header(0, 0, 100, 0);
    assert_eq!(
        rx.on_data(&long, false, 0),
        RxVerdict::Drop(DropReason::NoMemory)
    );
    assert!(rx.ack_for(0).is_none(), "the path saw nothing");
    allow_all();
    assert!(matches!(rx.on_data(&long, false, 1), RxVerdict::Place(_)));
    assert_eq!(rx.ack_for(0).map(|a| a.cum_psn), Some(1));
    let before = rx.footprint();
    for pkt in 1..100 {
        let h = header(0, pkt, 100, pkt);
        assert!(matches!(rx.on_data(&h, false, 2), RxVerdict::Place(_)));
    }
    assert_eq!(rx.pop_completion().map(|c| c.len), Some(100 * MTU));
    assert!(rx.footprint() < before, "the bitmap went back to the heap");
}

#[test]
fn events_without_their_queue_are_counted_dropped() {
    allow_all();
    let mut tx: Sender<Aimd, Tight> = Sender::with_cc(
        SenderConfig {
            mtu: MTU,
            planes: 2,
            ..SenderConfig::DEFAULT
        },
        Aimd,
        0,
    )
    .unwrap();
    let idle = tx.footprint();
    refuse([size_of::<EventQueue>(), usize::MAX, usize::MAX]);
    tx.plane_down(1, 0);
    assert_eq!(tx.pop_event(), None);
    assert_eq!(
        tx.events_dropped(),
        4,
        "plane 1's 2 paths' failures and their moves to plane 0"
    );
    assert_eq!(tx.footprint(), idle);
    // Memory back: the next events are kept.
    allow_all();
    tx.plane_down(0, 0);
    assert!(matches!(
        tx.pop_event(),
        Some(SenderEvent::PathFailed {
            cause: FailCause::PlaneDown,
            ..
        })
    ));
    assert!(tx.footprint() > idle);
    tx.clear_events();
    assert_eq!(tx.footprint(), idle);
}

#[test]
fn path_state_and_records_are_the_sizes_budgeted() {
    // The kmalloc classes the footprint counts them in (heap.rs): a path
    // 512 B, its ring 2 KiB. Growing either doubles what each path costs.
    assert!(size_of::<TxPath>() <= 512, "TxPath {}", size_of::<TxPath>());
    assert!(size_of::<PathRing>() <= 2048);
    assert!(size_of::<PktBitmap>() <= 128);
}
