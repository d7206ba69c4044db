//! What a declared store's saves have left on disk, kept as the saved list's own children.
//!
//! The store needs the children on disk to write an adopted copy as a difference (only what
//! changed) instead of whole. Kept as a map of its own that every save updated entry by entry,
//! it was a second copy of the declared list on every node beside the list it mirrors: a few
//! hundred bytes per declared child, 200-300 MB per node at a million children. Once a save of
//! a mutation's changes is submitted, what the disk holds is what the saved list holds, so
//! [`OnDisk`] takes the list's children instead: a persistent map, shared in O(1) and costing
//! nothing per child.
//!
//! "What the disk holds is the list" is checked, not assumed: the list keeps a digest of its
//! content (the wrapping sum of its entries' digests, `core::declared::list::content_digest`),
//! and [`OnDisk`] keeps the digest of what is on disk, moved per id the changes write. When the
//! two agree the list's children are taken; when they do not (a caller passed a list holding
//! changes it did not name), the written entries are applied to a copy of the map, as a map of
//! its own would have been.

use std::collections::BTreeMap;

use crate::core::declared::list::{
    content_digest, DeclaredChange, DeclaredChild, DeclaredChildren, DeclaredList,
};
use crate::model::ChildId;

/// The children the submitted saves leave on disk, and their digest.
#[derive(Clone, Debug, Default)]
pub(crate) struct OnDisk {
    children: DeclaredChildren,
    digest: u64,
}

/// How [`OnDisk::record`] took the changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The disk now holds the list: its children were taken, shared.
    Shared,
    /// The changes do not account for the whole list: they were applied to a copy.
    Copied,
}

fn entry_digest(id: &ChildId, child: Option<&DeclaredChild>) -> u64 {
    child.map_or(0, |child| content_digest(std::iter::once((id, child))))
}

impl OnDisk {
    /// What a store holding `list` has on disk.
    pub(crate) fn of(list: &DeclaredList) -> Self {
        Self {
            children: list.children().clone(),
            digest: list.digest(),
        }
    }

    /// The children on disk.
    pub(crate) fn children(&self) -> &DeclaredChildren {
        &self.children
    }

    /// Records the save of `changes`, written as the store writes them: a `Put` writes the
    /// entry `list` holds (none when `list` no longer has it), a `Removed` deletes it, a
    /// `Cleared` deletes everything before it.
    pub(crate) fn record(&mut self, list: &DeclaredList, changes: &[DeclaredChange]) -> Recorded {
        let mut cleared = false;
        // Each written id's value once the changes are on disk (`None`: deleted).
        let mut written: BTreeMap<&ChildId, Option<&DeclaredChild>> = BTreeMap::new();
        for change in changes {
            match change {
                DeclaredChange::Unchanged => {}
                DeclaredChange::Put(id) => {
                    if let Some(child) = list.get(id) {
                        written.insert(id, Some(child));
                    }
                }
                DeclaredChange::Removed(id) => {
                    written.insert(id, None);
                }
                DeclaredChange::Cleared => {
                    cleared = true;
                    written.clear();
                }
            }
        }
        let before = |id: &ChildId| (!cleared).then(|| self.children.get(id)).flatten();
        let mut digest = if cleared { 0 } else { self.digest };
        for (id, after) in &written {
            digest = digest
                .wrapping_sub(entry_digest(id, before(id)))
                .wrapping_add(entry_digest(id, *after));
        }
        if digest == list.digest() {
            self.children = list.children().clone();
            self.digest = digest;
            return Recorded::Shared;
        }
        if cleared {
            self.children = DeclaredChildren::new();
        }
        for (id, after) in written {
            match after {
                Some(child) => {
                    self.children.insert(id.clone(), child.clone());
                }
                None => {
                    self.children.remove(id);
                }
            }
        }
        self.digest = digest;
        Recorded::Copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};

    fn declared(list: &mut DeclaredList, id: &str, kind: &str) -> DeclaredChange {
        list.add(ChildSpec::new(id, kind), Metadata::new(), "n1")
            .expect("a permanent child")
    }

    fn same_content(on_disk: &OnDisk, list: &DeclaredList) -> bool {
        on_disk.children() == list.children() && on_disk.digest == list.digest()
    }

    #[test]
    fn changes_that_account_for_the_list_share_its_children() {
        let mut list = DeclaredList::new();
        let mut on_disk = OnDisk::of(&list);
        let changes: Vec<_> = (0..100)
            .map(|i| declared(&mut list, &format!("c{i:03}"), "counter"))
            .collect();
        assert_eq!(on_disk.record(&list, &changes), Recorded::Shared);
        assert!(on_disk.children().ptr_eq(list.children()));
        let removed = list.remove(&"c007".into(), "n1");
        let replaced = declared(&mut list, "c008", "ticker");
        assert_eq!(
            on_disk.record(&list, &[removed, replaced]),
            Recorded::Shared
        );
        assert!(same_content(&on_disk, &list));
    }

    #[test]
    fn a_put_then_removed_within_the_changes_is_only_removed() {
        let mut list = DeclaredList::new();
        declared(&mut list, "kept", "counter");
        let mut on_disk = OnDisk::of(&list);
        let put = declared(&mut list, "gone", "counter");
        let removed = list.remove(&"gone".into(), "n1");
        assert_eq!(on_disk.record(&list, &[put, removed]), Recorded::Shared);
        assert!(same_content(&on_disk, &list));
    }

    #[test]
    fn a_clear_then_puts_leaves_only_the_puts() {
        let mut list = DeclaredList::new();
        declared(&mut list, "a", "counter");
        declared(&mut list, "b", "counter");
        let mut on_disk = OnDisk::of(&list);
        let cleared = list.clear("n1");
        let put = declared(&mut list, "c", "counter");
        assert_eq!(on_disk.record(&list, &[cleared, put]), Recorded::Shared);
        assert!(same_content(&on_disk, &list));
    }

    #[test]
    fn changes_the_list_holds_but_nobody_named_are_not_taken_for_saved() {
        let mut list = DeclaredList::new();
        let mut on_disk = OnDisk::of(&list);
        let named = declared(&mut list, "named", "counter");
        // Changed in memory, never handed to a save: not on disk.
        declared(&mut list, "unnamed", "counter");
        assert_eq!(on_disk.record(&list, &[named]), Recorded::Copied);
        assert!(on_disk.children().contains_key(&ChildId::from("named")));
        assert!(!on_disk.children().contains_key(&ChildId::from("unnamed")));
        // Saved later, the disk holds the list again and takes its children.
        let again = declared(&mut list, "unnamed", "ticker");
        assert_eq!(on_disk.record(&list, &[again]), Recorded::Shared);
        assert!(same_content(&on_disk, &list));
    }
}
