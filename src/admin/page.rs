//! `GET /v1/children?limit=&after=`: one page of the registry copy, in id order.
//!
//! `after` is an exclusive cursor (the last id of the previous page), so a listing walked page
//! by page sees every child that stayed in the registry meanwhile exactly once, however many
//! were added or removed around it. A page is chosen in one pass over the rows keeping at most
//! `limit + 1` of them ([`PageCollector`]): a node never copies its whole registry for a
//! request, whatever its size.

use std::collections::BTreeMap;

use super::bodies::ChildView;

/// One page of `GET /v1/children`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildrenPage {
    /// The children of the page, sorted by id.
    pub children: Vec<ChildView>,
    /// The cursor of the next page (the last id of this one), or `None` on the last page.
    pub next_after: Option<String>,
}

impl ChildrenPage {
    /// The page of `children` (any order) after `after`, at most `limit` long.
    pub fn of(children: Vec<ChildView>, after: Option<&str>, limit: usize) -> Self {
        let mut pages = PageCollector::new(after, limit);
        for child in children {
            let id = child.id.clone();
            pages.offer(&id, || child);
        }
        pages.finish()
    }
}

/// Picks the `limit` smallest ids greater than the cursor from rows offered in any order,
/// holding at most `limit + 1` of them (the extra one tells whether a next page exists).
pub struct PageCollector<'a> {
    after: Option<&'a str>,
    limit: usize,
    kept: BTreeMap<String, ChildView>,
}

impl<'a> PageCollector<'a> {
    /// A collector of the page after `after` (the first page for `None`), `limit` long.
    pub fn new(after: Option<&'a str>, limit: usize) -> Self {
        Self {
            after,
            limit,
            kept: BTreeMap::new(),
        }
    }

    /// Offers the child `id`; `view` builds it only if it may be on the page.
    pub fn offer(&mut self, id: &str, view: impl FnOnce() -> ChildView) {
        if self.after.is_some_and(|after| id <= after) {
            return;
        }
        let full = self.kept.len() > self.limit;
        if full
            && self
                .kept
                .last_key_value()
                .is_some_and(|(last, _)| id >= last.as_str())
        {
            return;
        }
        self.kept.insert(id.to_owned(), view());
        if self.kept.len() > self.limit + 1 {
            self.kept.pop_last();
        }
    }

    /// The page, and the cursor of the next one if more children follow.
    pub fn finish(mut self) -> ChildrenPage {
        let more = self.kept.len() > self.limit;
        if more {
            self.kept.pop_last();
        }
        let next_after = if more {
            self.kept.last_key_value().map(|(id, _)| id.clone())
        } else {
            None
        };
        ChildrenPage {
            children: self.kept.into_values().collect(),
            next_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn child(id: &str) -> ChildView {
        ChildView {
            id: id.to_owned(),
            kind: "counter".into(),
            nodes: Vec::new(),
            metadata: Default::default(),
            durable: None,
        }
    }

    fn walk(ids: &[String], limit: usize) -> Vec<String> {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = ChildrenPage::of(
                ids.iter().map(|id| child(id)).collect(),
                after.as_deref(),
                limit,
            );
            assert!(page.children.len() <= limit);
            seen.extend(page.children.iter().map(|c| c.id.clone()));
            match page.next_after {
                Some(next) => {
                    assert_eq!(Some(&next), seen.last());
                    after = Some(next);
                }
                None => return seen,
            }
        }
    }

    #[test]
    fn the_last_page_has_no_cursor() {
        let ids: Vec<String> = ["b", "a", "c"].map(String::from).to_vec();
        let page = ChildrenPage::of(ids.iter().map(|i| child(i)).collect(), None, 3);
        assert_eq!(page.next_after, None);
        let page = ChildrenPage::of(ids.iter().map(|i| child(i)).collect(), None, 2);
        assert_eq!(page.next_after.as_deref(), Some("b"));
        let page = ChildrenPage::of(ids.iter().map(|i| child(i)).collect(), Some("b"), 2);
        assert_eq!(page.children, vec![child("c")]);
        assert_eq!(page.next_after, None);
    }

    proptest! {
        #[test]
        fn walking_the_pages_lists_every_id_once_in_order(
            ids in proptest::collection::btree_set("[a-z0-9]{1,6}", 0..60),
            limit in 1usize..10,
        ) {
            let mut shuffled: Vec<String> = ids.iter().cloned().collect();
            shuffled.reverse();
            let seen = walk(&shuffled, limit);
            prop_assert_eq!(seen, ids.into_iter().collect::<Vec<_>>());
        }
    }
}
