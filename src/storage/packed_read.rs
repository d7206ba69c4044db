//! Reading a packed row's fields straight from its bytes, for the reads that need a few of them
//! on every start and stop (the bindings a stop routes by, the counts a removal takes out, the
//! declared mark, the expiry).
//!
//! The layout is bincode's with variable-length integers, as [`super::packed_row`] writes it
//! through serde; serde's decoder costs about five times these reads (a stop read the head
//! twice, about a twentieth of its instructions). The unpacking of a whole row stays with
//! serde. The property test of `packed_row` reads every field these reads give back against
//! the row that was packed.

use super::packed_row::PackedName;
use crate::model::Pid;

/// A position in a packed row's bytes. Every read is `None` past the end or on bytes `pack`
/// cannot have written.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// Bincode's varint: under 251 the byte itself; 251, 252 and 253 announce a little-endian
    /// u16, u32 and u64.
    pub fn varint(&mut self) -> Option<u64> {
        Some(match self.byte()? {
            b @ 0..=250 => u64::from(b),
            251 => u64::from(u16::from_le_bytes(self.take(2)?.try_into().ok()?)),
            252 => u64::from(u32::from_le_bytes(self.take(4)?.try_into().ok()?)),
            253 => u64::from_le_bytes(self.take(8)?.try_into().ok()?),
            _ => return None,
        })
    }

    /// A signed integer: zigzag over the varint.
    pub fn signed(&mut self) -> Option<i64> {
        let n = self.varint()?;
        Some(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    pub fn bool(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    /// Whether an `Option` is `Some` (its tag byte).
    pub fn some(&mut self) -> Option<bool> {
        self.bool()
    }

    pub fn str(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.varint()?).ok()?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    pub fn skip_str(&mut self) -> Option<()> {
        let len = usize::try_from(self.varint()?).ok()?;
        self.take(len).map(|_| ())
    }

    pub fn name(&mut self) -> Option<PackedName<'a>> {
        match self.varint()? {
            0 => Some(PackedName::Interned(u32::try_from(self.varint()?).ok()?)),
            1 => Some(PackedName::Inline(self.str()?)),
            _ => None,
        }
    }
}

/// The head of a packed row as read: what a placement and the counts need, the arguments,
/// restart and shutdown passed over.
pub(super) struct Head<'a> {
    pub id: &'a str,
    pub expires_at_ms: Option<u64>,
    pub kind: PackedName<'a>,
    pub bound: Vec<(PackedName<'a>, Pid)>,
}

/// The fields after the metadata: the authored version, its author when not the first bound
/// node, the change time from the store's base, the declared mark.
pub(super) struct Tail<'a> {
    pub epoch: u64,
    pub author: Option<PackedName<'a>>,
    pub durable: bool,
}

/// The id and the expiry, the first two fields.
pub(super) fn key<'a>(cursor: &mut Cursor<'a>) -> Option<(&'a str, Option<u64>)> {
    let id = cursor.str()?;
    Some((id, expiry_after_id(cursor)?))
}

/// The expiry, the id passed over unread: a point read has found the row by its id already.
pub(super) fn expiry(cursor: &mut Cursor<'_>) -> Option<Option<u64>> {
    cursor.skip_str()?;
    expiry_after_id(cursor)
}

fn expiry_after_id(cursor: &mut Cursor<'_>) -> Option<Option<u64>> {
    Some(if cursor.some()? {
        Some(cursor.varint()?)
    } else {
        None
    })
}

/// The head, leaving the cursor on the metadata.
pub(super) fn head<'a>(cursor: &mut Cursor<'a>) -> Option<Head<'a>> {
    let mut bound = Vec::new();
    let (id, expires_at_ms) = key(cursor)?;
    let kind = walk_after_key(cursor, Some(&mut |node, pid| bound.push((node, pid))))?;
    Some(Head {
        id,
        expires_at_ms,
        kind,
        bound,
    })
}

/// Calls `each` with every binding, the id passed over unread (what a stop routes by and
/// unbinds, and what a reap or a full sync selects rows by). Answers the row's expiry.
pub(super) fn bindings<'a>(
    cursor: &mut Cursor<'a>,
    each: &mut dyn FnMut(PackedName<'a>, Pid),
) -> Option<Option<u64>> {
    let expires_at_ms = expiry(cursor)?;
    walk_after_key(cursor, Some(each))?;
    Some(expires_at_ms)
}

/// Passes over the head to the metadata, for a read of the tail alone (its bindings kept
/// nowhere).
pub(super) fn skip_head(cursor: &mut Cursor<'_>) -> Option<()> {
    expiry(cursor)?;
    walk_after_key(cursor, None).map(|_| ())
}

/// Walks the head after its key: the kind returned, each binding given to `each` when there
/// is one, the arguments, restart and shutdown passed over.
fn walk_after_key<'a>(
    cursor: &mut Cursor<'a>,
    mut each: Option<&mut dyn FnMut(PackedName<'a>, Pid)>,
) -> Option<PackedName<'a>> {
    let kind = cursor.name()?;
    if cursor.some()? {
        cursor.skip_str()?; // arguments
    }
    cursor.varint()?; // restart
    if cursor.varint()? == 0 {
        cursor.varint()?; // shutdown's grace
    }
    // Each binding takes at least two bytes: a claimed count is read binding by binding, so
    // one beyond the bytes fails at their end.
    let n = cursor.varint()?;
    for _ in 0..n {
        let node = cursor.name()?;
        let pid = cursor.varint()?;
        if let Some(each) = each.as_deref_mut() {
            each(node, pid);
        }
    }
    Some(kind)
}

/// The tail, from a cursor left on the metadata by [`head`].
pub(super) fn tail<'a>(cursor: &mut Cursor<'a>) -> Option<Tail<'a>> {
    let entries = cursor.varint()?;
    for _ in 0..entries {
        cursor.skip_str()?;
        cursor.skip_str()?;
    }
    let epoch = cursor.varint()?;
    let author = if cursor.some()? {
        Some(cursor.name()?)
    } else {
        None
    };
    cursor.signed()?; // change time
    let durable = cursor.bool()?;
    Some(Tail {
        epoch,
        author,
        durable,
    })
}
