//! A node's health status: one rule, so that `GET /v1/health`, the readiness probe and the
//! cluster view that other nodes read can never disagree about what a node is.

/// What keeps a node from serving, strongest first: a node the cluster set aside is also
/// without quorum for its own work, and a partitioned node may also be alone, but an operator
/// acts on the first that holds.
pub fn status(
    set_aside: bool,
    partitioned: bool,
    isolated: bool,
    storage_problem: bool,
) -> &'static str {
    if set_aside {
        "set_aside"
    } else if partitioned {
        "partitioned"
    } else if isolated {
        "isolated"
    } else if storage_problem {
        "degraded"
    } else {
        "ok"
    }
}

#[cfg(test)]
mod tests {
    use super::status;

    #[test]
    fn the_strongest_reason_names_the_status() {
        assert_eq!(status(false, false, false, false), "ok");
        assert_eq!(status(false, false, false, true), "degraded");
        assert_eq!(status(false, false, true, true), "isolated");
        assert_eq!(status(false, true, true, true), "partitioned");
        assert_eq!(status(true, true, true, true), "set_aside");
        assert_eq!(status(true, false, false, false), "set_aside");
    }
}
