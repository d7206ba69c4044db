//! Whether a store file can be memory-mapped safely, decided before LMDB maps it.
//!
//! LMDB maps the whole file and reads its pages through the map. A page the file's header
//! reaches but the file no longer holds (a file truncated by a crash, a full disk during a copy,
//! or an operator) is not an error LMDB can return: the first read of it raises `SIGBUS` and the
//! process dies, at every start. So before the map exists, the file is read with ordinary reads:
//! both meta pages must be LMDB's, and every page reachable from the newest one (the B-trees of
//! the free list, the main database and its named databases, with their overflow pages) must lie
//! inside the file. A file that fails is treated like any corrupt store (rotated aside).
//!
//! The file may legitimately be shorter than its header's last page (LMDB's own comment on
//! `mm_last_pg`: pages at the end that were dirtied and freed within one transaction are listed
//! in the free list but never written), so the length alone does not condemn a file; only a
//! reachable page past the end does. The layout read here is LMDB's on a 64-bit host (the only
//! one this crate builds a map for); pages are read in the host's byte order, as LMDB writes them.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// LMDB's magic number at the start of every meta page.
const MAGIC: u32 = 0xBEEF_C0DE;
/// The data format of the LMDB this crate links (`MDB_DATA_VERSION` without `MDB_DEVEL`).
const DATA_VERSION: u32 = 1;
/// Size of a page header (`PAGEHDRSZ`): page number, pad, flags, lower and upper bounds.
const PAGE_HEADER: usize = 16;
/// Bytes of a meta page read to decide (the header and `MDB_meta`).
const META_BYTES: usize = PAGE_HEADER + 136;
/// Size of an `MDB_db` record.
const DB_RECORD: usize = 48;
/// Offset of the root page number within an `MDB_db`.
const DB_ROOT: usize = 40;
/// Size of a node header (`NODESZ`): lo, hi, flags, key size.
const NODE_HEADER: usize = 8;
/// No page (an empty tree's root).
const INVALID_PAGE: u64 = u64::MAX;

const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const P_OVERFLOW: u16 = 0x04;
const P_META: u16 = 0x08;
const P_LEAF2: u16 = 0x20;
const F_BIGDATA: u16 = 0x01;
const F_SUBDATA: u16 = 0x02;

/// What the file's header says: the page size, the last page and the trees' roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta {
    page_size: u64,
    last_page: u64,
    txn_id: u64,
    free_root: u64,
    main_root: u64,
}

/// Checks the store file at `path`. `Ok(Ok(()))`: it may be mapped (or does not exist yet);
/// `Ok(Err(reason))`: it is damaged; `Err`: it could not be read (permissions, I/O), which says
/// nothing about the file and must not rotate it.
pub(crate) fn check(path: &Path) -> std::io::Result<Result<(), String>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Ok(())),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    check_pages(len, |offset, buf| read_fully(&file, offset, buf))
}

fn read_fully(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<bool> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// The check over a file of `len` bytes whose bytes `read(offset, buf)` fills (`Ok(false)` when
/// the file ends first). Separate from the file so that every case is a unit test.
fn check_pages(
    len: u64,
    mut read: impl FnMut(u64, &mut [u8]) -> std::io::Result<bool>,
) -> std::io::Result<Result<(), String>> {
    if cfg!(not(target_pointer_width = "64")) {
        // The layout read below is the 64-bit one; elsewhere LMDB alone decides.
        return Ok(Ok(()));
    }
    if len == 0 {
        return Ok(Err(
            "the file is empty (0 bytes): it holds no LMDB header".into()
        ));
    }
    let mut buf = [0u8; META_BYTES];
    if !read(0, &mut buf)? {
        return Ok(Err(format!(
            "the file ({len} bytes) is shorter than one meta page"
        )));
    }
    let first = match parse_meta(&buf) {
        Ok(meta) => meta,
        Err(reason) => return Ok(Err(format!("meta page 0: {reason}"))),
    };
    if !read(first.page_size, &mut buf)? {
        return Ok(Err(format!(
            "the file ({len} bytes) ends before its second meta page at byte {}",
            first.page_size
        )));
    }
    let second = match parse_meta(&buf) {
        Ok(meta) => meta,
        Err(reason) => return Ok(Err(format!("meta page 1: {reason}"))),
    };
    if second.page_size != first.page_size {
        return Ok(Err("the two meta pages disagree on the page size".into()));
    }
    let meta = if second.txn_id > first.txn_id {
        second
    } else {
        first
    };
    if len >= (meta.last_page + 1).saturating_mul(meta.page_size) {
        // Every page the header can name is inside the file.
        return Ok(Ok(()));
    }
    Walk::new(len, meta).run(&mut read)
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

/// Reads a meta page's fields (`MDB_meta` after the page header).
fn parse_meta(buf: &[u8]) -> Result<Meta, String> {
    let field = |v: Option<u64>| v.ok_or_else(|| "truncated meta page".to_string());
    let flags = u16_at(buf, 10).ok_or("truncated page header")?;
    if flags & P_META == 0 {
        return Err("not a meta page".into());
    }
    let magic = u32_at(buf, PAGE_HEADER).ok_or("truncated meta page")?;
    if magic != MAGIC {
        return Err(format!("bad magic {magic:#x}"));
    }
    let version = u32_at(buf, PAGE_HEADER + 4).ok_or("truncated meta page")?;
    if version != DATA_VERSION {
        return Err(format!("data format {version}, expected {DATA_VERSION}"));
    }
    // magic, version, address, map size, then the free list's MDB_db (whose pad is the page
    // size) and the main database's, then the last page and the transaction id.
    let dbs = PAGE_HEADER + 24;
    let page_size = u64::from(u32_at(buf, dbs).ok_or("truncated meta page")?);
    if !(512..=65_536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(format!("implausible page size {page_size}"));
    }
    Ok(Meta {
        page_size,
        free_root: field(u64_at(buf, dbs + DB_ROOT))?,
        main_root: field(u64_at(buf, dbs + DB_RECORD + DB_ROOT))?,
        last_page: field(u64_at(buf, dbs + 2 * DB_RECORD))?,
        txn_id: field(u64_at(buf, dbs + 2 * DB_RECORD + 8))?,
    })
}

/// A walk over every page reachable from one meta page, each read once.
struct Walk {
    len: u64,
    meta: Meta,
    seen: Vec<bool>,
    pending: Vec<u64>,
}

impl Walk {
    fn new(len: u64, meta: Meta) -> Self {
        // Only pages inside the file are ever marked, so the set is bounded by the file's size.
        let pages = usize::try_from(len / meta.page_size).unwrap_or(usize::MAX);
        Self {
            len,
            meta,
            seen: vec![false; pages],
            pending: [meta.free_root, meta.main_root]
                .into_iter()
                .filter(|&root| root != INVALID_PAGE)
                .collect(),
        }
    }

    /// Marks pages `first..first + count` as read; an error if one lies past the file's end or
    /// the header's last page, or was reached before (a cycle).
    fn claim(&mut self, first: u64, count: u64) -> Result<(), String> {
        let end = first.checked_add(count).ok_or("page number overflows")?;
        if end > self.meta.last_page + 1 {
            return Err(format!(
                "page {} is past the header's last page {}",
                end - 1,
                self.meta.last_page
            ));
        }
        let needed = end.saturating_mul(self.meta.page_size);
        if needed > self.len {
            return Err(format!(
                "the file is {} bytes but its page {} ends at byte {needed}: truncated",
                self.len,
                end - 1
            ));
        }
        for page in first..end {
            let slot = &mut self.seen[page as usize];
            if *slot {
                return Err(format!("page {page} is reached twice"));
            }
            *slot = true;
        }
        Ok(())
    }

    fn run(
        mut self,
        read: &mut impl FnMut(u64, &mut [u8]) -> std::io::Result<bool>,
    ) -> std::io::Result<Result<(), String>> {
        let mut page = vec![0u8; self.meta.page_size as usize];
        while let Some(number) = self.pending.pop() {
            if let Err(reason) = self.claim(number, 1) {
                return Ok(Err(reason));
            }
            if !read(number * self.meta.page_size, &mut page)? {
                return Ok(Err(format!("page {number} cannot be read whole")));
            }
            if let Err(reason) = self.visit(number, &page, read) {
                return Ok(Err(reason));
            }
        }
        Ok(Ok(()))
    }

    /// Queues the pages a branch or leaf page points to.
    fn visit(
        &mut self,
        number: u64,
        page: &[u8],
        read: &mut impl FnMut(u64, &mut [u8]) -> std::io::Result<bool>,
    ) -> Result<(), String> {
        let bad = |what: &str| format!("page {number}: {what}");
        let flags = u16_at(page, 10).ok_or_else(|| bad("no header"))?;
        if flags & P_LEAF2 != 0 {
            return Ok(());
        }
        let branch = flags & P_BRANCH != 0;
        if !branch && flags & P_LEAF == 0 {
            return Err(bad("neither a branch nor a leaf page"));
        }
        let lower = usize::from(u16_at(page, 12).ok_or_else(|| bad("no header"))?);
        if lower < PAGE_HEADER || lower > page.len() {
            return Err(bad("bad lower bound"));
        }
        for index in 0..(lower - PAGE_HEADER) / 2 {
            let at = usize::from(
                u16_at(page, PAGE_HEADER + 2 * index).ok_or_else(|| bad("bad node pointer"))?,
            );
            let header = page
                .get(at..at + NODE_HEADER)
                .ok_or_else(|| bad("node past the page's end"))?;
            let lo = u64::from(u16_at(header, 0).unwrap_or(0));
            let hi = u64::from(u16_at(header, 2).unwrap_or(0));
            let node_flags = u16_at(header, 4).unwrap_or(0);
            let key_size = usize::from(u16_at(header, 6).unwrap_or(0));
            if branch {
                // A branch node keeps its child's page number in lo, hi and flags.
                self.pending
                    .push(lo | (hi << 16) | (u64::from(node_flags) << 32));
                continue;
            }
            let data = at + NODE_HEADER + key_size;
            if node_flags & F_BIGDATA != 0 {
                let first = u64_at(page, data).ok_or_else(|| bad("overflow node cut short"))?;
                self.overflow(first, read)?;
            } else if node_flags & F_SUBDATA != 0 {
                let root =
                    u64_at(page, data + DB_ROOT).ok_or_else(|| bad("sub-database cut short"))?;
                if root != INVALID_PAGE {
                    self.pending.push(root);
                }
            }
        }
        Ok(())
    }

    /// Claims an overflow run (a value too large for a leaf), whose length is in its first
    /// page's header.
    fn overflow(
        &mut self,
        first: u64,
        read: &mut impl FnMut(u64, &mut [u8]) -> std::io::Result<bool>,
    ) -> Result<(), String> {
        self.claim(first, 1)?;
        let mut header = [0u8; PAGE_HEADER];
        let whole = read(first * self.meta.page_size, &mut header)
            .map_err(|e| format!("overflow page {first}: {e}"))?;
        if !whole {
            return Err(format!("overflow page {first} cannot be read"));
        }
        let flags = u16_at(&header, 10).unwrap_or(0);
        let count = u64::from(u32_at(&header, 12).unwrap_or(0));
        if flags & P_OVERFLOW == 0 || count == 0 {
            return Err(format!("page {first} is not an overflow page"));
        }
        self.claim(first + 1, count - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_page(page_size: u32, txn_id: u64, last_page: u64) -> Vec<u8> {
        let mut page = vec![0u8; page_size as usize];
        page[10..12].copy_from_slice(&P_META.to_ne_bytes());
        page[16..20].copy_from_slice(&MAGIC.to_ne_bytes());
        page[20..24].copy_from_slice(&DATA_VERSION.to_ne_bytes());
        page[40..44].copy_from_slice(&page_size.to_ne_bytes());
        page[40 + DB_ROOT..48 + DB_ROOT].copy_from_slice(&INVALID_PAGE.to_ne_bytes());
        page[88 + DB_ROOT..96 + DB_ROOT].copy_from_slice(&INVALID_PAGE.to_ne_bytes());
        page[136..144].copy_from_slice(&last_page.to_ne_bytes());
        page[144..152].copy_from_slice(&txn_id.to_ne_bytes());
        page
    }

    fn run(bytes: &[u8]) -> Result<(), String> {
        check_pages(bytes.len() as u64, |offset, buf| {
            let start = offset as usize;
            match bytes.get(start..start + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(true)
                }
                None => Ok(false),
            }
        })
        .unwrap()
    }

    #[test]
    fn an_empty_environment_passes() {
        let mut file = meta_page(4096, 0, 1);
        file.extend(meta_page(4096, 1, 1));
        assert_eq!(run(&file), Ok(()));
    }

    #[test]
    fn empty_short_and_foreign_files_are_damaged() {
        assert!(run(&[]).unwrap_err().contains("empty"));
        assert!(run(&[0u8; 100]).unwrap_err().contains("shorter"));
        let only_first = meta_page(4096, 0, 1);
        assert!(run(&only_first).unwrap_err().contains("second meta page"));
        let mut garbage = vec![0xabu8; 8192];
        garbage[10..12].copy_from_slice(&P_META.to_ne_bytes());
        assert!(run(&garbage).unwrap_err().contains("magic"));
    }

    #[test]
    fn a_root_past_the_end_is_damaged_but_a_short_free_tail_is_not() {
        let mut first = meta_page(4096, 0, 5);
        let second = meta_page(4096, 1, 5);
        // No tree: pages 2..=5 may be free and unwritten.
        let mut file = first.clone();
        file.extend(second.clone());
        assert_eq!(run(&file), Ok(()));
        // The newest meta's main tree is rooted at page 4, which the file does not hold.
        first[88 + DB_ROOT..96 + DB_ROOT].copy_from_slice(&4u64.to_ne_bytes());
        first[144..152].copy_from_slice(&7u64.to_ne_bytes());
        let mut file = first;
        file.extend(second);
        assert!(run(&file).unwrap_err().contains("truncated"));
    }
}
