//! The role each local replica was last told (`redundancy_signal`), so a replica is told again
//! only when its role changes. A leaf `HubShared` holds; the telling is [`super::roles`].

use std::sync::Mutex;

use ractor::ActorId;

use crate::core::replication::Role;
use crate::model::{ChildId, FastHashMap};

/// The role each local instance was last told, keyed by child, with the instance told.
#[derive(Default)]
pub(crate) struct ToldRoles(pub(super) Mutex<FastHashMap<ChildId, (ActorId, Role)>>);
