//! `--sync`: how registry changes reach the other nodes, in one flag:
//!
//! | flag | strategy |
//! |---|---|
//! | `pubsub` | every change to every peer (the default) |
//! | `gossip` | each change to 3 peers that pass it on; a sync round every 15 000 ms |
//! | `gossip:2000` | ... a round every 2 000 ms |
//! | `gossip:2000:4` | ... each change to 4 peers |
//! | `gossip:2000:4:all` | ... and every node starts rounds, not only the first by name |
//!
//! The config file's `[sync]` table (the hub's own form, `type = "..."`) says the same; the flag
//! wins.

use process_hub::SyncStrategy;

/// Parses the flag's value; the message names the accepted forms.
pub fn parse_sync(value: &str) -> Result<SyncStrategy, String> {
    let mut parts = value.split(':');
    let name = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    match name {
        "pubsub" if rest.is_empty() => Ok(SyncStrategy::PubSub),
        "pubsub" => Err("pubsub takes no values".to_owned()),
        "gossip" => {
            if rest.len() > 3 {
                return Err("gossip takes at most INTERVAL_MS:RECIPIENTS:all".to_owned());
            }
            let SyncStrategy::Gossip {
                mut interval_ms,
                mut recipients,
                mut restricted_init,
            } = SyncStrategy::gossip()
            else {
                unreachable!("SyncStrategy::gossip() is gossip")
            };
            if let Some(v) = rest.first() {
                interval_ms = v
                    .parse()
                    .map_err(|_| format!("gossip: the round interval must be ms, not {v:?}"))?;
            }
            if let Some(v) = rest.get(1) {
                recipients = v
                    .parse()
                    .map_err(|_| format!("gossip: recipients must be a whole number, not {v:?}"))?;
            }
            match rest.get(2) {
                None => {}
                Some(&"all") => restricted_init = false,
                Some(other) => return Err(format!("gossip: {other:?} is not `all`")),
            }
            Ok(SyncStrategy::Gossip {
                interval_ms,
                recipients,
                restricted_init,
            })
        }
        other => Err(format!(
            "unknown sync strategy {other:?}; one of pubsub, gossip[:INTERVAL_MS[:RECIPIENTS[:all]]]"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_parses_and_bad_ones_say_why() {
        assert_eq!(parse_sync("pubsub").unwrap(), SyncStrategy::PubSub);
        assert_eq!(parse_sync("gossip").unwrap(), SyncStrategy::gossip());
        assert_eq!(
            parse_sync("gossip:2000:4:all").unwrap(),
            SyncStrategy::Gossip {
                interval_ms: 2000,
                recipients: 4,
                restricted_init: false
            }
        );
        for (bad, says) in [
            ("flood", "unknown sync strategy"),
            ("pubsub:3", "no values"),
            ("gossip:fast", "must be ms"),
            ("gossip:100:x", "whole number"),
            ("gossip:100:2:some", "not `all`"),
            ("gossip:1:2:all:4", "at most"),
        ] {
            let err = parse_sync(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_file_table_or_the_flag_over_it_sets_the_nodes_strategy() {
        use super::super::node_settings::NodeFlags;
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: NodeFlags,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\n[sync]\ntype = \"gossip\"\nrecipients = 2\n",
        )
        .unwrap();
        let config = path.to_str().unwrap();
        let file_only = Cli::try_parse_from(["node", "--config", config]).unwrap();
        assert_eq!(
            file_only.flags.resolve().unwrap().sync,
            Some(SyncStrategy::Gossip {
                interval_ms: 15_000,
                recipients: 2,
                restricted_init: true
            })
        );
        let flag = Cli::try_parse_from(["node", "--config", config, "--sync", "pubsub"]).unwrap();
        assert_eq!(
            flag.flags.resolve().unwrap().sync,
            Some(SyncStrategy::PubSub)
        );
        let err = Cli::try_parse_from(["node", "--sync", "gossip:x"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("must be ms"), "{err}");
    }
}
