//! The device tick visits only the QPs marked as having work for it
//! (design.md, "The tick and many QPs"; the driver's `qp_marks.rs` over
//! the engine's `marks.rs`). What that rests on, checked here:
//!
//! * an idle connected QP has no tick work (no engine deadline, no held
//!   ACK, no data accepted within the receiver rate hints' window), so
//!   thousands of idle QPs cost the tick nothing;
//! * a QP that only receives stays marked for the device's count of
//!   receiving QPs (protocol.md 6.5) until its window has passed, is
//!   counted at every tick until then, and the tick that finds it idle
//!   drops it from the count and lets it go; a QP no tick visits takes a
//!   newcomer's hint from the last count;
//! * no mark is lost: work left under a slot's lock and marked there, or
//!   published and then marked by a poster, is always found, also with
//!   QPs destroyed while marked, their slots reused, and QPs marking
//!   themselves before they are in the table;
//! * what the tick costs with 4,080 slots, scanned or marked (`--ignored
//!   --nocapture`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use common::write;
use metaroce_engine::config::{ReceiverConfig, SenderConfig};
use metaroce_engine::marks::Marks;
use metaroce_engine::rcn::{Shares, RECEIVING_WINDOW_NS};
use metaroce_engine::receiver::{Receiver, RxVerdict};
use metaroce_engine::sender::{Sender, TxKind};

/// A connected QP's two engines, as the driver's connect leaves them.
fn connected() -> (Sender, Receiver) {
    let cfg = SenderConfig {
        dst_qpn: 7,
        mtu: 1024,
        ..SenderConfig::DEFAULT
    };
    let mut tx = Sender::new(cfg, 0).unwrap();
    tx.start_at(1000, false);
    let mut rx = Receiver::new(ReceiverConfig {
        peer_qpn: 7,
        mtu: 1024,
    })
    .unwrap();
    rx.start_at(1000);
    (tx, rx)
}

/// What the driver's `Transport::tick_work` asks of the engines.
fn has_tick_work(tx: &Sender, rx: &Receiver) -> bool {
    tx.next_deadline().is_some() || rx.ack_deadline().is_some() || rx.rcn_due()
}

const MS: u64 = 1_000_000;

#[test]
fn an_idle_connected_qp_has_no_tick_work_before_or_after_a_transfer() {
    let (mut tx, mut rx) = connected();
    assert!(!has_tick_work(&tx, &rx), "connected, nothing sent");
    for _ in 0..8 {
        tx.post(&write(8 * 1024)).unwrap();
    }
    let mut now = 1_000;
    let mut ticks_with_work = 0;
    while tx.outstanding() > 0 {
        let mut sent = Vec::new();
        while let Some(p) = tx.next_packet(now) {
            if let TxKind::Data { header, .. } = p.kind {
                sent.push(header);
            }
        }
        assert!(
            sent.is_empty() || tx.next_deadline().is_some(),
            "packets in flight: a timer armed"
        );
        // The receiver acknowledges as the driver does: what is due at
        // once, the rest held for the tick.
        let mut acks = Vec::new();
        for h in &sent {
            assert!(!matches!(rx.on_data(h, false, now), RxVerdict::Drop(_)));
            acks.extend(rx.ack_now(h.path_id));
        }
        // The tick (the QP is marked while it holds ACKs or received
        // lately).
        if has_tick_work(&tx, &rx) {
            ticks_with_work += 1;
            assert!(rx.rcn_count(&Shares::NONE, now), "receiving");
        }
        acks.extend(core::iter::from_fn(|| rx.flush(u64::MAX)));
        for a in &acks {
            tx.on_ack(a, now + 10_000);
        }
        while rx.pop_completion().is_some() {}
        while tx.pop_completion().is_some() {}
        now += 1_000_000;
        assert!(now < 10_000_000_000, "transfer stalled");
    }
    assert!(ticks_with_work > 0);
    // Still counted as receiving until its window has passed: the tick
    // that finds it idle lets it go.
    let last = now - MS;
    while rx.rcn_due() {
        let counted = rx.rcn_count(&Shares::NONE, now);
        assert_eq!(counted, now - last < RECEIVING_WINDOW_NS, "at {now}");
        now += MS;
        assert!(now - last <= RECEIVING_WINDOW_NS + MS, "never let go");
    }
    assert!(
        !has_tick_work(&tx, &rx),
        "idle again: no deadline {:?}, no held ACK {:?}",
        tx.next_deadline(),
        rx.ack_deadline()
    );
}

/// A QP of the model: its work under its own lock, as a `Transport`'s
/// state under its bh-safe lock.
struct Qp {
    work: Mutex<u32>,
}

/// The model device: a table of QP slots under a lock, and the marks.
struct Device {
    table: Mutex<Vec<Option<Arc<Qp>>>>,
    marks: Marks<4>,
}

const SLOTS: usize = 200;

impl Device {
    /// A hold of `qp`'s lock that leaves `add` units of work: marked on
    /// the way out when work is left (the driver's `Locked`).
    fn leave_work(&self, slot: usize, qp: &Qp, add: u32) {
        let mut w = qp.work.lock().unwrap();
        *w += add;
        self.marks.mark_if(slot, || *w > 0);
    }

    /// The tick (or the transmit worker's turn): each marked slot's QP,
    /// under the table's lock, does one unit of its work; what is left
    /// marks it again. Returns the slots visited.
    fn tick(&self) -> usize {
        let mut visited = 0;
        for slot in self.marks.take() {
            visited += 1;
            let table = self.table.lock().unwrap();
            if let Some(qp) = &table[slot] {
                let mut w = qp.work.lock().unwrap();
                *w = w.saturating_sub(1);
                self.marks.mark_if(slot, || *w > 0);
            }
        }
        visited
    }
}

impl Device {
    fn new() -> Self {
        Self {
            table: Mutex::new((0..SLOTS).map(|_| None).collect()),
            marks: Marks::new(),
        }
    }

    /// A new QP, not yet in the table.
    fn qp() -> Arc<Qp> {
        Arc::new(Qp {
            work: Mutex::new(0),
        })
    }

    fn work_at(&self, slot: usize) -> u32 {
        let qp = self.table.lock().unwrap()[slot].clone().unwrap();
        let work = *qp.work.lock().unwrap();
        work
    }

    /// Ticks until nothing is marked.
    fn quiesce(&self) {
        let mut rounds = 0;
        while self.tick() > 0 {
            rounds += 1;
            assert!(rounds < 1_000_000);
        }
    }
}

#[test]
fn each_race_one_at_a_time() {
    // A QP marks itself for work its connect left before it is in the
    // table; a tick takes the mark and finds the slot empty; the QP is
    // inserted and marked again, and the next tick finds it.
    let dev = Device::new();
    let a = Device::qp();
    dev.leave_work(3, &a, 1);
    assert_eq!(dev.tick(), 1, "visited, the slot empty");
    dev.table.lock().unwrap()[3] = Some(a.clone());
    assert_eq!(
        dev.tick(),
        0,
        "not marked: without the mark at insertion, lost"
    );
    dev.marks.mark(3);
    dev.quiesce();
    assert_eq!(dev.work_at(3), 0);

    // Destroyed while marked: the tick visits an empty slot. A new QP in
    // the slot (another QPN, the same slot) is found by its own mark, and
    // a visit to it on its predecessor's mark only costs a look.
    dev.leave_work(3, &a, 2);
    drop(dev.table.lock().unwrap()[3].take());
    let b = Device::qp();
    dev.table.lock().unwrap()[3] = Some(b.clone());
    dev.marks.mark(3);
    dev.quiesce();
    assert_eq!(dev.work_at(3), 0);
    assert_eq!(
        *a.work.lock().unwrap(),
        2,
        "the destroyed QP is not touched"
    );

    // Work left while a tick runs, after the tick took the QP's word: the
    // QP marks itself, the tick in progress does not see it, the next
    // one does.
    let c = Device::qp();
    dev.table.lock().unwrap()[70] = Some(c.clone());
    dev.leave_work(3, &b, 1);
    dev.leave_work(70, &c, 1);
    let mut take = dev.marks.take();
    assert_eq!(take.next(), Some(3));
    {
        // The tick's visit of slot 3: its work done, nothing left.
        let table = dev.table.lock().unwrap();
        let mut w = table[3].as_ref().unwrap().work.lock().unwrap();
        *w -= 1;
        dev.marks.mark_if(3, || *w > 0);
    }
    dev.leave_work(3, &b, 1); // word 0 taken: marked for the next take
    assert_eq!(take.next(), Some(70), "word 1 taken now");
    assert_eq!(take.next(), None);
    drop(take);
    assert!(dev.marks.is_marked(3) && !dev.marks.is_marked(70));

    // A QP visited with work left marks itself again (slot 70's unit from
    // above was taken, not done, by the hand-run tick: more is left now).
    dev.leave_work(70, &c, 3);
    assert_eq!(dev.tick(), 2);
    assert!(dev.marks.is_marked(70), "work left");
    dev.quiesce();
    assert_eq!(dev.work_at(3) + dev.work_at(70), 0);
}

fn rand(seed: &mut u64) -> usize {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed as usize
}

#[test]
fn no_mark_is_lost_with_qps_destroyed_and_slots_reused() {
    let dev = Arc::new(Device::new());
    for slot in 0..SLOTS {
        dev.table.lock().unwrap()[slot] = Some(Device::qp());
    }
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Data paths: a QP looked up in the table (as the receive path does)
    // leaves work under its lock.
    for t in 0..2u64 {
        let dev = dev.clone();
        threads.push(thread::spawn(move || {
            let mut seed = 0x9e37_79b9 + t;
            for _ in 0..40_000 {
                let slot = rand(&mut seed) % SLOTS;
                let qp = dev.table.lock().unwrap()[slot].clone();
                if let Some(qp) = qp {
                    dev.leave_work(slot, &qp, 1 + (rand(&mut seed) % 3) as u32);
                }
            }
        }));
    }
    // Destroy and create: a QP leaves the table (marked or not), a new one
    // takes its slot, marks itself for work its connect left before it is
    // in the table, then is marked again once it is (the driver's
    // `change_state` at RTR). Also after the data paths stopped, so that
    // no later work of theirs hides a lost mark.
    let recycle = |dev: Arc<Device>, seed: u64, n: usize| {
        thread::spawn(move || {
            let mut seed = seed;
            for _ in 0..n {
                let slot = rand(&mut seed) % SLOTS;
                drop(dev.table.lock().unwrap()[slot].take());
                let qp = Device::qp();
                dev.leave_work(slot, &qp, 2);
                dev.table.lock().unwrap()[slot] = Some(qp);
                dev.marks.mark(slot);
            }
        })
    };
    threads.push(recycle(dev.clone(), 0x2545_f491, 5_000));
    // The tick, running all along.
    let ticker = {
        let (dev, done) = (dev.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                dev.tick();
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    recycle(dev.clone(), 0x5851_f42d, 2_000).join().unwrap();
    done.store(true, Ordering::Release);
    ticker.join().unwrap();
    // Quiet: ticks until no slot is marked. A lost mark leaves work behind.
    dev.quiesce();
    for (slot, qp) in dev.table.lock().unwrap().iter().enumerate() {
        let left = *qp.as_ref().unwrap().work.lock().unwrap();
        assert_eq!(left, 0, "slot {slot}: work left unmarked (a lost timer)");
    }
}

#[test]
fn a_poster_marking_without_the_lock_is_found() {
    // Kernel datagram QPs: the request is published (the ring's producer
    // index), then marked, with no lock shared with the tick.
    let marks = Arc::new(Marks::<4>::new());
    let posted: Arc<Vec<AtomicU32>> = Arc::new((0..SLOTS).map(|_| AtomicU32::new(0)).collect());
    let sent: Arc<Vec<AtomicU32>> = Arc::new((0..SLOTS).map(|_| AtomicU32::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let tick = |marks: &Marks<4>, posted: &[AtomicU32], sent: &[AtomicU32]| {
        let mut n = 0;
        for slot in marks.take() {
            n += 1;
            // Send everything posted so far.
            sent[slot].store(posted[slot].load(Ordering::Acquire), Ordering::Relaxed);
        }
        n
    };
    let ticker = {
        let (marks, posted, sent, done) =
            (marks.clone(), posted.clone(), sent.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                tick(&marks, &posted, &sent);
            }
        })
    };
    let mut seed = 0x1234_5678;
    for _ in 0..100_000 {
        let slot = rand(&mut seed) % SLOTS;
        posted[slot].fetch_add(1, Ordering::Release);
        marks.mark(slot);
    }
    done.store(true, Ordering::Release);
    ticker.join().unwrap();
    while tick(&marks, &posted, &sent) > 0 {}
    for slot in 0..SLOTS {
        assert_eq!(
            sent[slot].load(Ordering::Relaxed),
            posted[slot].load(Ordering::Relaxed),
            "slot {slot}: a request posted and never sent"
        );
    }
}

/// The tick's cost on a device with 4,080 QP slots, 4,000 of them idle
/// connected QPs: the old scan (every slot, each QP locked and asked for
/// its work: engine deadlines, held ACKs) beside the marks (only marked
/// QPs visited). Host numbers, for the design note; the kernel's
/// `spin_lock_bh` costs about what an uncontended `Mutex` does.
#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn tick_cost_scan_versus_marks() {
    const MAX_QP: usize = 4080;
    const QPS: usize = 4000;
    const TICKS: u32 = 200;
    type Engines = Mutex<(Sender, Receiver)>;
    let table: Mutex<Vec<Option<Engines>>> = Mutex::new(
        (0..MAX_QP)
            .map(|k| (k < QPS).then(|| Mutex::new(connected())))
            .collect(),
    );
    let marks = Marks::<64>::new();
    let scan = || {
        let table = table.lock().unwrap();
        let mut busy = 0;
        for qp in table.iter().flatten() {
            let mut g = qp.lock().unwrap();
            let (tx, rx) = &mut *g;
            while rx.flush(u64::MAX).is_some() {}
            if tx.next_deadline().is_some() {
                busy += 1;
            }
        }
        busy
    };
    let marked = |due: usize| {
        for k in 0..due {
            marks.mark(k * (QPS / due.max(1)));
        }
        let mut busy = 0;
        for slot in marks.take() {
            let table = table.lock().unwrap();
            if let Some(qp) = &table[slot] {
                let mut g = qp.lock().unwrap();
                let (tx, rx) = &mut *g;
                while rx.flush(u64::MAX).is_some() {}
                if has_tick_work(tx, rx) {
                    busy += 1;
                }
            }
        }
        busy
    };
    let per_tick = |f: &dyn Fn() -> usize| {
        f();
        let t = Instant::now();
        for _ in 0..TICKS {
            std::hint::black_box(f());
        }
        t.elapsed().as_nanos() as f64 / f64::from(TICKS)
    };
    let scanned = per_tick(&scan);
    println!("scan of {MAX_QP} slots, {QPS} idle QPs: {scanned:.0} ns per tick");
    for due in [0, 1, 40, 400] {
        let ns = per_tick(&|| marked(due));
        println!("marks, {due} QPs marked: {ns:.0} ns per tick");
    }
}

/// A QP slot of the receiver rate hints' model: the QP's engines, as
/// under its lock, and the peer's sender that feeds its receiver.
struct RcnQp {
    qp: (Sender, Receiver),
    peer: Sender,
}

impl RcnQp {
    fn new() -> Self {
        Self {
            qp: connected(),
            peer: connected().0,
        }
    }

    /// The receive path: one data packet from the peer accepted at `now`,
    /// its ACK (if one goes at once) back to the peer; a QP the last count
    /// did not find receiving first takes the device's newcomer hint (the
    /// driver's `receive_data`). Returns the ACK's hint, if one went.
    fn receive(&mut self, newcomer_kbps: u32, now: u64) -> Option<u32> {
        self.peer.post(&write(1024)).unwrap();
        let Some(TxKind::Data { header, .. }) = self.peer.next_packet(now).map(|p| p.kind) else {
            panic!("the peer sends");
        };
        let rx = &mut self.qp.1;
        assert!(!matches!(
            rx.on_data(&header, false, now),
            RxVerdict::Drop(_)
        ));
        if !rx.rcn_counted() {
            rx.set_rate_hint(newcomer_kbps);
        }
        let ack = rx.ack_now(header.path_id)?;
        self.peer.on_ack(&ack, now);
        Some(ack.rate_hint_kbps)
    }
}

/// The model device for the count: QP slots, the tick's marks, the last
/// count's shares and the hint the data path gives a newcomer.
struct RcnDevice {
    qps: Vec<RcnQp>,
    marks: Marks<1>,
    shares: Shares,
    newcomer_kbps: u32,
}

impl RcnDevice {
    /// Mbit/s.
    const CAPACITY: u32 = 100_000;

    fn new(n: usize) -> Self {
        Self {
            qps: (0..n).map(|_| RcnQp::new()).collect(),
            marks: Marks::new(),
            shares: Shares::new(Self::CAPACITY, 0),
            newcomer_kbps: 0,
        }
    }

    /// QP `k` receives a packet at `now`; its lock let go marks it if it
    /// has tick work (`Locked`). Returns its ACK's hint.
    fn receive(&mut self, k: usize, now: u64) -> Option<u32> {
        let hint = self.qps[k].receive(self.newcomer_kbps, now);
        let (tx, rx) = &self.qps[k].qp;
        self.marks.mark_if(k, || has_tick_work(tx, rx));
        hint
    }

    /// The driver's tick at `now`: each marked QP is visited, counted if
    /// receiving and given its hint from the last count (before its held
    /// ACKs go), and marked again if work is left. Returns the slots
    /// visited and those counted.
    fn tick(&mut self, now: u64) -> (Vec<usize>, Vec<usize>) {
        let (mut visited, mut counted) = (Vec::new(), Vec::new());
        for k in self.marks.take() {
            visited.push(k);
            let q = &mut self.qps[k];
            let (tx, rx) = &mut q.qp;
            if rx.rcn_due() && rx.rcn_count(&self.shares, now) {
                counted.push(k);
            }
            while let Some(ack) = rx.flush(u64::MAX) {
                q.peer.on_ack(&ack, now);
            }
            self.marks.mark_if(k, || has_tick_work(tx, rx));
        }
        self.shares = self.shares.recount(counted.len() as u32);
        self.newcomer_kbps = self.shares.hint(false);
        (visited, counted)
    }

    fn hint(&self, k: usize) -> u32 {
        self.qps[k].qp.1.rate_hint_kbps()
    }
}

#[test]
fn a_qp_that_only_receives_is_counted_for_its_window_then_let_go() {
    // The hints in kbit/s, of a capacity in Mbit/s.
    const C: u32 = RcnDevice::CAPACITY * 1000;
    // QP 0 receives one packet, QP 1 a packet every millisecond, QP 2
    // starts later, QP 3 never: none sends, so the count is their only
    // tick work once their held ACKs went.
    let mut dev = RcnDevice::new(4);
    let first = MS / 2;
    dev.receive(0, first);
    dev.receive(1, first);
    let mut now = MS;
    let mut ticks = Vec::new();
    while now <= 8 * MS {
        let (visited, counted) = dev.tick(now);
        assert!(!visited.contains(&3), "an idle QP costs the tick nothing");
        // QP 0 is counted while its packet is within the window; the
        // tick after that visits it, drops it from the count, and it has
        // no tick work left.
        let within = now - first < RECEIVING_WINDOW_NS;
        assert_eq!(counted.contains(&0), within, "QP 0 at {now} ns");
        assert_eq!(visited.contains(&0), now - first < RECEIVING_WINDOW_NS + MS);
        assert_eq!(dev.marks.is_marked(0), within, "QP 0 marked at {now} ns");
        if within && now > MS {
            let (tx, rx) = &dev.qps[0].qp;
            assert!(
                tx.next_deadline().is_none() && rx.ack_deadline().is_none(),
                "the count is QP 0's only tick work"
            );
        }
        assert!(counted.contains(&1), "QP 1 receives throughout");
        // Each visit gave the hint of the count before: at 2 ms, QPs 0
        // and 1 of the 1 ms count had C/2 each; at 5 ms QP 0, dropped,
        // was last given its C/3 of the 4 ms count (QPs 0, 1, 2).
        if now == 2 * MS {
            assert_eq!((dev.hint(0), dev.hint(1)), (C / 2, C / 2));
        }
        if now == 5 * MS {
            assert_eq!(
                (dev.hint(0), dev.hint(1), dev.hint(2)),
                (C / 3, C / 3, C / 3)
            );
        }
        if now == 6 * MS {
            assert_eq!((dev.hint(1), dev.hint(2)), (C / 2, C / 2));
        }
        ticks.push((now, counted.clone()));
        // Between ticks: QP 1 receives, and QP 2 starts at 2.5 ms, when
        // QPs 0 and 1 were counted: its first ACK, before any tick visited
        // it, carries a newcomer's share of that count.
        dev.receive(1, now + MS / 2);
        if now == 2 * MS {
            assert_eq!(
                dev.receive(2, now + MS / 2),
                Some(C / 3),
                "a newcomer beside 2"
            );
        }
        now += MS;
    }
    // QP 2 receives no more: it is let go too, and nothing but QP 1 is
    // marked once the windows have passed.
    while now <= 13 * MS {
        let (visited, counted) = dev.tick(now);
        assert_eq!(counted, [1], "at {now} ns");
        assert!(visited.iter().all(|&k| k == 1 || k == 2), "{visited:?}");
        dev.receive(1, now + MS / 2);
        now += MS;
    }
    assert!(!dev.marks.is_marked(0) && !dev.marks.is_marked(2) && !dev.marks.is_marked(3));
    // QP 1 alone now advertises none, and an idle QP's next ACK a
    // newcomer's half.
    assert_eq!(dev.hint(1), 0);
    assert_eq!(dev.receive(3, now), Some(C / 2));
    assert_eq!(ticks[0].1, [0, 1]);
    assert_eq!(ticks[3].1, [0, 1, 2]);
    assert_eq!(ticks[4].1, [1, 2], "QP 0 dropped from the count at 5 ms");
}
