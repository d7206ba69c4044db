//! Faults on the link between two nodes of a [`Network`], made of iptables rules in the first
//! node's namespace: the link dropped both ways, or one direction only. A DROP rule loses
//! packets silently, as a broken cable or a firewall does: no reset, so an established
//! connection stays open and only the hub's heartbeats notice. The other nodes still reach
//! both ends, which is what makes the partition partial.
//!
//! iptables comes from apt-get: scripts/test.sh installs it when missing; without it the test
//! fails with a message that says so (as it does without root).

use std::process::Command;

use super::Network;

/// Packets from node `from` to node `to` are dropped, and with `both` those from `to` to
/// `from` as well (1-based node numbers).
#[derive(Clone, Copy, Debug)]
pub struct Link {
    pub from: usize,
    pub to: usize,
    pub both: bool,
}

impl Link {
    /// Both directions between `a` and `b`.
    pub fn cut(a: usize, b: usize) -> Self {
        Self {
            from: a,
            to: b,
            both: true,
        }
    }

    /// `from` -> `to` only.
    pub fn one_way(from: usize, to: usize) -> Self {
        Self {
            from,
            to,
            both: false,
        }
    }
}

/// Fails, saying how to get it, when iptables is missing.
pub fn iptables_present() -> Result<(), String> {
    match Command::new("iptables").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "iptables --version: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!(
            "iptables is needed to cut one link (scripts/test.sh installs it; or run \
             'apt-get install iptables' as root): {e}"
        )),
    }
}

impl Network {
    /// Drops `link`'s packets until [`Network::unblock`].
    pub fn block(&self, link: Link) -> Result<(), String> {
        self.rules("-A", link)
    }

    /// Removes the rules [`Network::block`] added for `link`.
    pub fn unblock(&self, link: Link) -> Result<(), String> {
        self.rules("-D", link)
    }

    fn rules(&self, verb: &str, link: Link) -> Result<(), String> {
        let ns = &self.namespaces[link.from - 1];
        let peer = self.addr(link.to);
        let mut rules = vec![["OUTPUT", "-d", peer.as_str()]];
        if link.both {
            rules.push(["INPUT", "-s", peer.as_str()]);
        }
        for [chain, dir, addr] in rules {
            let args = [
                "netns", "exec", ns, "iptables", "-w", verb, chain, dir, addr,
            ];
            let out = Command::new("ip")
                .args(args)
                .args(["-j", "DROP"])
                .output()
                .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "ip {} -j DROP: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(())
    }
}
