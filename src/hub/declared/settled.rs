//! The copy a DeclaredLeader stands behind, and which of its own copies were acknowledged: what
//! a rebuild after a failed write compares the disk with (`degraded`).
//!
//! A write of the list can fail while writes queued behind it still reach the disk (a full disk
//! that has room again by then). Their callers were refused with the earlier failure, so the
//! disk then holds copies of this node's that nobody was told took effect. The rebuild must not
//! adopt them: it writes the settled copy back over them instead.

use std::sync::Mutex;

use crate::core::declared::delta::ListStamp;
use crate::core::declared::list::DeclaredList;

/// Shared by the DeclaredLeader and its persists' tasks (which complete in order).
#[derive(Default)]
pub(super) struct Settled(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// The latest copy decided by a leader that this node holds: a peer's copy or delta it
    /// adopted, or one of its own written with every write before it.
    copy: Option<DeclaredList>,
    /// The latest of this node's own copies it stands behind (acknowledged, or found on its
    /// disk at boot).
    own: Option<ListStamp>,
}

fn is_own(node: &str, list: &DeclaredList) -> bool {
    list.last_mutated_by() == Some(node)
}

impl Settled {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `list` is decided: adopted from a peer, or written with every write before it. An older
    /// copy does not replace a newer one (an adoption settles at once, while an earlier
    /// operation's write may complete after it).
    pub fn settle(&self, node: &str, list: &DeclaredList) {
        let mut inner = self.inner();
        if inner
            .copy
            .as_ref()
            .is_none_or(|c| c.version() <= list.version())
        {
            inner.copy = Some(list.clone());
        }
        if is_own(node, list)
            && inner
                .own
                .as_ref()
                .is_none_or(|o| o.version <= list.version())
        {
            inner.own = Some(list.stamp());
        }
    }

    /// `list` is what the node holds after a boot or a rebuild that took the disk as it is.
    pub fn reset(&self, node: &str, list: Option<&DeclaredList>) {
        let mut inner = self.inner();
        inner.copy = list.cloned();
        if let Some(list) = list.filter(|l| is_own(node, l)) {
            inner.own = Some(list.stamp());
        }
    }

    /// The settled copy, when `disk` holds a copy of this node's own that it never stood
    /// behind and that is not older than its last one it did (an older one of its own was
    /// settled once, and replaced).
    pub fn to_restore(&self, node: &str, disk: Option<&DeclaredList>) -> Option<DeclaredList> {
        let disk = disk.filter(|d| is_own(node, d))?;
        let inner = self.inner();
        let unacknowledged = match &inner.own {
            Some(own) => own != &disk.stamp() && disk.version() >= own.version,
            None => true,
        };
        unacknowledged.then(|| inner.copy.clone()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::declared::list::DeclaredChildren;

    fn list(version: u64, by: &str) -> DeclaredList {
        DeclaredList::from_parts(version, DeclaredChildren::new(), Some(by.to_owned()))
    }

    #[test]
    fn an_own_copy_beyond_the_last_acknowledged_is_restored_to_the_settled_one() {
        let settled = Settled::default();
        settled.reset("n3", Some(&list(20, "n3")));
        // A peer's copy adopted since: the copy to write back.
        settled.settle("n3", &list(49, "n1"));
        let back = settled.to_restore("n3", Some(&list(53, "n3")));
        assert_eq!(back.map(|l| l.stamp()), Some(list(49, "n1").stamp()));
    }

    #[test]
    fn an_acknowledged_own_copy_or_a_peers_on_the_disk_is_taken_as_it_is() {
        let settled = Settled::default();
        settled.reset("n5", None);
        settled.settle("n5", &list(27, "n5"));
        // It lost a tie to a peer's copy of the same version, whose write failed: the disk's
        // own copy was acknowledged.
        settled.settle("n5", &list(27, "n2"));
        assert!(settled.to_restore("n5", Some(&list(27, "n5"))).is_none());
        // A peer's copy on the disk is a leader's decision.
        assert!(settled.to_restore("n5", Some(&list(30, "n2"))).is_none());
        // An own copy older than the last acknowledged one was acknowledged once.
        settled.settle("n5", &list(31, "n5"));
        assert!(settled.to_restore("n5", Some(&list(29, "n5"))).is_none());
        // Nothing on the disk: nothing to undo.
        assert!(settled.to_restore("n5", None).is_none());
    }

    #[test]
    fn an_older_copy_settling_late_does_not_replace_a_newer_one() {
        let settled = Settled::default();
        settled.settle("n1", &list(40, "n2"));
        settled.settle("n1", &list(36, "n1"));
        let back = settled.to_restore("n1", Some(&list(41, "n1")));
        assert_eq!(back.map(|l| l.version()), Some(40));
    }
}
