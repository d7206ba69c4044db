//! Faults on the link between two nodes of a [`Network`], made of iptables rules in the first
//! node's namespace: the link dropped both ways, or one direction only, or a random share of
//! its packets lost both ways (`-m statistic --mode random`). A DROP rule loses packets
//! silently, as a broken cable or a firewall does: no reset, so an established connection
//! stays open and only the hub's heartbeats (or TCP's retransmissions giving up) notice. The
//! other nodes still reach both ends, which is what makes the partition partial.
//!
//! iptables comes from apt-get: scripts/test.sh installs it when missing; without it the test
//! fails with a message that says so (as it does without root).

use std::process::Command;

use super::Network;

/// Packets from node `from` to node `to` are dropped, and with `both` those from `to` to
/// `from` as well (1-based node numbers): every one, or with `loss` each with that
/// probability, drawn per packet.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    pub from: usize,
    pub to: usize,
    pub both: bool,
    pub loss: Option<f64>,
}

impl Link {
    /// Both directions between `a` and `b`.
    pub fn cut(a: usize, b: usize) -> Self {
        Self {
            from: a,
            to: b,
            both: true,
            loss: None,
        }
    }

    /// Both directions between `a` and `b`, each packet dropped with probability `loss`
    /// (in `(0, 1)`; iptables reads it to about nine decimals).
    pub fn lossy(a: usize, b: usize, loss: f64) -> Self {
        Self {
            loss: Some(loss),
            ..Self::cut(a, b)
        }
    }

    /// `from` -> `to` only.
    pub fn one_way(from: usize, to: usize) -> Self {
        Self {
            from,
            to,
            both: false,
            loss: None,
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

    /// How many packets `link`'s rules dropped so far (read before [`Network::unblock`],
    /// which removes the rules and their counters): proof that the fault was in place.
    pub fn dropped(&self, link: Link) -> Result<u64, String> {
        let ns = &self.namespaces[link.from - 1];
        let peer = self.addr(link.to);
        let mut total = 0;
        for chain in ["OUTPUT", "INPUT"] {
            let args = [
                "netns", "exec", ns, "iptables", "-w", "-L", chain, "-v", "-x", "-n",
            ];
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            // `pkts bytes target prot opt in out source destination [match]`, one rule a line.
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if fields.get(2) == Some(&"DROP") && fields.contains(&peer.as_str()) {
                    total += fields[0]
                        .parse::<u64>()
                        .map_err(|e| format!("{chain} counter {line:?}: {e}"))?;
                }
            }
        }
        Ok(total)
    }

    fn rules(&self, verb: &str, link: Link) -> Result<(), String> {
        let ns = &self.namespaces[link.from - 1];
        let peer = self.addr(link.to);
        let mut rules = vec![["OUTPUT", "-d", peer.as_str()]];
        if link.both {
            rules.push(["INPUT", "-s", peer.as_str()]);
        }
        // The same match on `-A` and `-D`: iptables deletes the rule that matches exactly.
        let mut target: Vec<String> = Vec::new();
        if let Some(loss) = link.loss {
            target
                .extend(["-m", "statistic", "--mode", "random", "--probability"].map(String::from));
            target.push(format!("{loss}"));
        }
        target.extend(["-j", "DROP"].map(String::from));
        for [chain, dir, addr] in rules {
            let args = [
                "netns", "exec", ns, "iptables", "-w", verb, chain, dir, addr,
            ];
            let out = Command::new("ip")
                .args(args)
                .args(&target)
                .output()
                .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "ip {} {}: {}",
                    args.join(" "),
                    target.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(())
    }
}
