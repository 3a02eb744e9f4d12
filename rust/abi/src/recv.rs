//! Receive WQEs (`struct metaroce_recv_wqe`): the consumer's `wr_id`, then
//! its SGEs. Produced by the provider (or the kernel for a kernel
//! consumer), consumed by the kernel as messages arrive.

use super::field::{get_u32, get_u64, put_u32, put_u64};
use super::layout::recv::{NUM_SGE, SIZE, WR_ID};
use super::reject::Reject;
use super::sge::{self, Sge};

/// A validated receive request with up to `SGES` SGEs. Fixed size: the
/// kernel reads it in atomic context and allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWqe<const SGES: usize> {
    /// The consumer's id, returned in the completion.
    pub wr_id: u64,
    /// Where the message goes, in order (`num_sge` used).
    pub sges: [Sge; SGES],
    /// SGEs in use.
    pub num_sge: usize,
}

impl<const SGES: usize> RecvWqe<SGES> {
    /// A receive with no buffer (a message placed into it fails with a
    /// length error): what a posted entry that does not validate becomes,
    /// so that it still completes, in error, with its `wr_id`.
    pub fn without_buffer(wr_id: u64) -> Self {
        Self {
            wr_id,
            sges: [Sge::default(); SGES],
            num_sge: 0,
        }
    }

    /// Reads and validates the receive WQE in `elem`: at most `SGES` SGEs,
    /// all inside the element, none wrapping.
    pub fn decode(elem: &[u8]) -> Result<Self, Reject> {
        if elem.len() < SIZE {
            return Err(Reject::ElementTooShort);
        }
        let mut wqe = Self::without_buffer(get_u64(elem, WR_ID));
        wqe.num_sge = sge::decode_all(elem, SIZE, get_u32(elem, NUM_SGE), &mut wqe.sges)?;
        Ok(wqe)
    }
}

/// The `wr_id` of the receive WQE whose header is `header`, whatever the
/// rest holds.
pub fn wr_id(header: &[u8; SIZE]) -> u64 {
    get_u64(header, WR_ID)
}

/// Bytes a receive WQE with `n` SGEs takes.
pub fn bytes_for(n: usize) -> usize {
    sge::bytes_with(SIZE, n)
}

/// Writes a receive WQE into `slot` (the header and the SGEs; the rest is
/// left as it is). Refused when it does not fit.
pub fn encode(slot: &mut [u8], wr_id: u64, sges: &[Sge]) -> Result<(), Reject> {
    if bytes_for(sges.len()) > slot.len() {
        return Err(Reject::BeyondElement);
    }
    let n = u32::try_from(sges.len()).map_err(|_| Reject::TooManySges)?;
    slot[..SIZE].fill(0);
    put_u64(slot, WR_ID, wr_id);
    put_u32(slot, NUM_SGE, n);
    sge::encode_all(slot, SIZE, sges);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: [Sge; 2] = [
        Sge {
            addr: 1,
            length: 2,
            lkey: 3,
        },
        Sge {
            addr: 4,
            length: 5,
            lkey: 6,
        },
    ];

    #[test]
    fn layout_by_hand_and_round_trip() {
        let mut slot = [0xaau8; 64];
        encode(&mut slot, 99, &S).unwrap();
        assert_eq!(&slot[0..8], &99u64.to_ne_bytes());
        assert_eq!(&slot[8..12], &2u32.to_ne_bytes());
        assert_eq!(&slot[12..16], &[0; 4], "reserved is zero");
        assert_eq!(&slot[16..24], &1u64.to_ne_bytes());
        assert_eq!(&slot[44..48], &6u32.to_ne_bytes());
        assert!(slot[48..].iter().all(|b| *b == 0xaa), "wrote past the SGEs");
        let w = RecvWqe::<4>::decode(&slot).unwrap();
        assert_eq!((w.wr_id, w.num_sge), (99, 2));
        assert_eq!(&w.sges[..2], &S);
        assert_eq!(wr_id(slot[..SIZE].try_into().unwrap()), 99);
    }

    #[test]
    fn encoding_more_than_the_slot_holds_is_refused() {
        let mut slot = [0u8; 48];
        assert_eq!(
            encode(&mut slot, 0, &[Sge::default(); 3]),
            Err(Reject::BeyondElement)
        );
        assert!(encode(&mut slot, 0, &S).is_ok());
    }

    #[test]
    fn hostile_elements_are_refused() {
        let mut slot = [0u8; 64];
        encode(&mut slot, 7, &S).unwrap();
        // More SGEs than the reader takes.
        assert_eq!(RecvWqe::<1>::decode(&slot), Err(Reject::TooManySges));
        // A count past the element.
        slot[8..12].copy_from_slice(&4u32.to_ne_bytes());
        assert_eq!(RecvWqe::<8>::decode(&slot), Err(Reject::BeyondElement));
        slot[8..12].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(RecvWqe::<8>::decode(&slot), Err(Reject::TooManySges));
        // A wrapping SGE.
        slot[8..12].copy_from_slice(&1u32.to_ne_bytes());
        slot[16..24].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(RecvWqe::<8>::decode(&slot), Err(Reject::SgeWraps));
        // Shorter than the header.
        assert_eq!(
            RecvWqe::<8>::decode(&slot[..15]),
            Err(Reject::ElementTooShort)
        );
    }
}
