//! Why an element or a ring header was refused.

/// What a decoder or encoder found wrong. Each side turns it into its
/// own error (an errno) at the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The element is shorter than the header of its kind.
    ElementTooShort,
    /// More SGEs than the reader accepts.
    TooManySges,
    /// The SGEs (or, encoding, the payload) do not fit the element.
    BeyondElement,
    /// More inline bytes than the reader accepts.
    InlineTooLong,
    /// An SGE whose `addr + length` wraps past 2^64: every later
    /// `addr + offset` relies on the range being representable.
    SgeWraps,
    /// A ring header (element size, element count) out of bounds or
    /// larger than its mapping.
    BadHeader,
    /// Producer and consumer more than a ring apart: the peer wrote
    /// its index wrong.
    IndicesApart,
}
