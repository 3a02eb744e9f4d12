//! What happened to a sender's paths, for a caller that reports it (the
//! driver's tracepoints): failures, replacements and recoveries of paths,
//! window decreases and the retry budget running out.
//!
//! The sender appends an event where the state changes and the caller
//! takes them with [`Sender::pop_event`](super::sender::Sender::pop_event)
//! after each call into the engine. The queue is bounded and taken from the
//! sender's [`Heap`] only when the first event comes: when the caller does
//! not keep up, or the heap refuses, new events are counted as dropped,
//! never block or overwrite the sender's state. Events are rare (no packet
//! that is sent or acknowledged normally makes one), so recording them
//! costs the data path nothing measurable.

use super::heap::{kmalloc_size, Global, Heap};

/// Why a packet was declared lost and queued for retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossCause {
    /// A SACK showed a hole with later packets of the same path received.
    Sack,
    /// The path's retransmission timer expired with the packet in flight.
    Timeout,
    /// The path's plane was reported down with the packet in flight.
    PlaneDown,
    /// Not lost: resent to draw the verdict (ACK or NAK) on a message
    /// whose packets were all acknowledged (protocol.md 4.3).
    Verdict,
    /// Not declared lost: a path's newest packet in flight, sent again
    /// on it when no ACK brought progress for its probe timeout, so that
    /// the ACK of the copy shows what of the path's tail was lost
    /// (protocol.md 4.3).
    TailProbe,
}

/// Why a path's congestion window shrank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutCause {
    /// ECN-CE echoes in the last RTT.
    Ecn,
    /// Queueing delay above target in the last RTT.
    Delay,
    /// `loss_md_threshold` SACK losses within one RTT.
    Loss,
    /// A retransmission timeout.
    Timeout,
}

/// Why a path stopped carrying data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailCause {
    /// Its retransmission timer expired: it carries only probes until one
    /// is answered (or an ACK shows it works).
    Timeout,
    /// Its plane was reported down: silent until the plane is up.
    PlaneDown,
}

/// How a probing path came to carry data again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoverCause {
    /// An ACK acknowledged new packets of it.
    Ack,
    /// Its probe was answered.
    ProbeReply,
    /// A late ACK showed that its last timeout was spurious (undone).
    SpuriousTimeout,
}

/// A path as it was when the event happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathTag {
    /// Path id (generation << 6 | slot).
    pub id: u16,
    /// Plane the path leaves on.
    pub plane: u8,
    /// Its UDP source port.
    pub src_port: u16,
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderEvent {
    /// `path` stopped carrying data.
    PathFailed {
        /// The path.
        path: PathTag,
        /// Why.
        cause: FailCause,
    },
    /// `old` went unanswered for `path_fail_probes` probes and was replaced
    /// in its slot by `new` (next generation, new source port, same plane).
    PathReplaced {
        /// The failed path.
        old: PathTag,
        /// Its replacement (probing).
        new: PathTag,
    },
    /// `path` carries data again.
    PathRecovered {
        /// The path.
        path: PathTag,
        /// How.
        cause: RecoverCause,
    },
    /// `path`'s window shrank from `old` to `new` (packets times
    /// [`CWND_ONE`](super::cc::CWND_ONE)).
    WindowDecrease {
        /// The path.
        path: PathTag,
        /// Window before.
        old: u32,
        /// Window after.
        new: u32,
        /// Why.
        cause: CutCause,
    },
    /// The retry budget passed without progress: `outstanding` messages
    /// failed with `RetryExceeded`.
    GiveUp {
        /// Messages failed.
        outstanding: u32,
    },
}

/// Events held until the caller takes them: as many as fit the 512 B
/// kmalloc class with the queue's two indices (16 B each).
pub const EVENT_QUEUE: usize = 31;

/// A bounded FIFO of [`SenderEvent`]s.
#[derive(Clone, Copy, Debug)]
pub struct EventQueue {
    buf: [SenderEvent; EVENT_QUEUE],
    head: u8,
    len: u8,
}

const _: () = assert!(core::mem::size_of::<EventQueue>() <= 512);
const _: () = assert!(EVENT_QUEUE <= u8::MAX as usize);

impl EventQueue {
    /// Empty.
    pub const EMPTY: Self = Self {
        buf: [SenderEvent::GiveUp { outstanding: 0 }; EVENT_QUEUE],
        head: 0,
        len: 0,
    };

    /// Appends `e`; `false` (and nothing kept) when the queue is full.
    pub fn push(&mut self, e: SenderEvent) -> bool {
        let len = usize::from(self.len);
        if len >= EVENT_QUEUE {
            return false;
        }
        let tail = (usize::from(self.head) + len) % EVENT_QUEUE;
        match self.buf.get_mut(tail) {
            Some(slot) => {
                *slot = e;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Takes the oldest event.
    pub fn pop(&mut self) -> Option<SenderEvent> {
        if self.len == 0 {
            return None;
        }
        let e = self.buf.get(usize::from(self.head)).copied();
        self.head = ((usize::from(self.head) + 1) % EVENT_QUEUE) as u8;
        self.len -= 1;
        e
    }
}

/// A sender's events: the queue, taken from the heap `H` when the first
/// event comes (most QPs never have one: an idle QP's memory stays within
/// its budget, design.md "Per-QP memory"), and the count of those that
/// found no room (the queue full, or the heap refused it).
pub struct Events<H: Heap = Global> {
    queue: Option<H::Box<EventQueue>>,
    dropped: u64,
}

impl<H: Heap> Events<H> {
    /// No queue, nothing dropped.
    pub const EMPTY: Self = Self {
        queue: None,
        dropped: 0,
    };

    /// Appends `e`, taking the queue if there is none yet; counts it as
    /// dropped when the queue is full or cannot be had. Never blocks or
    /// changes the sender's state.
    pub fn push(&mut self, e: SenderEvent) {
        if self.queue.is_none() {
            self.queue = H::copy_of(&EventQueue::EMPTY);
        }
        let kept = match self.queue.as_deref_mut() {
            Some(q) => q.push(e),
            None => false,
        };
        if !kept {
            self.dropped = self.dropped.saturating_add(1);
        }
    }

    /// Takes the oldest event.
    pub fn pop(&mut self) -> Option<SenderEvent> {
        self.queue.as_deref_mut().and_then(EventQueue::pop)
    }

    /// Events that did not fit (the caller fell behind, or no memory).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets every held event and gives the queue back to the heap (the
    /// next event takes it again).
    pub fn clear(&mut self) {
        self.queue = None;
    }

    /// Bytes held in the heap, in kmalloc classes (0 without a queue).
    pub fn footprint(&self) -> usize {
        match self.queue {
            Some(_) => kmalloc_size(core::mem::size_of::<EventQueue>()),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_bounded_counts_drops() {
        let mut q: Events = Events::EMPTY;
        assert_eq!(q.pop(), None);
        assert_eq!(q.footprint(), 0);
        for n in 0..EVENT_QUEUE as u32 + 3 {
            q.push(SenderEvent::GiveUp { outstanding: n });
        }
        assert_eq!(q.dropped(), 3);
        assert_eq!(q.footprint(), 512);
        for n in 0..EVENT_QUEUE as u32 {
            assert_eq!(q.pop(), Some(SenderEvent::GiveUp { outstanding: n }));
        }
        assert_eq!(q.pop(), None);
        // Wraps around.
        for n in 0..5 {
            q.push(SenderEvent::GiveUp { outstanding: n });
            assert_eq!(q.pop(), Some(SenderEvent::GiveUp { outstanding: n }));
        }
        q.push(SenderEvent::GiveUp { outstanding: 9 });
        q.clear();
        assert_eq!(q.pop(), None);
        assert_eq!(q.footprint(), 0);
        assert_eq!(q.dropped(), 3);
    }
}
