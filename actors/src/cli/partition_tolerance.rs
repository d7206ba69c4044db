//! `--partition-tolerance`: the hub's strategy for a split in one flag, as
//! `NAME[:NUMBER[:NUMBER|confirm]]`:
//!
//! | flag | strategy |
//! |---|---|
//! | `divergence` | both sides keep running (the default) |
//! | `static-quorum:3` | quorum is 3 members; `static-quorum:3:confirm` also at start |
//! | `dynamic-quorum:60:10000` | 60 % of the members plus those lost within 10 000 ms |
//! | `majority-quorum:5` | a majority of 5, or of the largest membership seen |
//!
//! The config file's `[partition_tolerance]` table (the hub's own form, `type = "..."`) says
//! the same; the flag wins.

use process_hub::PartitionTolerance;

/// Parses the flag's value; the message names the accepted forms.
pub fn parse_partition_tolerance(value: &str) -> Result<PartitionTolerance, String> {
    let mut parts = value.split(':');
    let name = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let number = |i: usize, what: &str| -> Result<u64, String> {
        rest.get(i)
            .ok_or_else(|| format!("{name} needs {what} (see --help)"))?
            .parse::<u64>()
            .map_err(|_| format!("{name}: {what} must be a whole number, not {:?}", rest[i]))
    };
    let at_most = |n: usize| -> Result<(), String> {
        if rest.len() > n {
            return Err(format!("{name} takes at most {n} values after its name"));
        }
        Ok(())
    };
    let strategy = match name.replace('_', "-").as_str() {
        "divergence" => {
            at_most(0)?;
            PartitionTolerance::Divergence
        }
        "static-quorum" => {
            at_most(2)?;
            let startup_confirm = match rest.get(1) {
                None => false,
                Some(&"confirm") => true,
                Some(other) => return Err(format!("static-quorum: {other:?} is not `confirm`")),
            };
            PartitionTolerance::StaticQuorum {
                quorum_size: number(0, "a quorum size in nodes")? as usize,
                startup_confirm,
            }
        }
        "dynamic-quorum" => {
            at_most(2)?;
            let percent = number(0, "a quorum percentage")?;
            PartitionTolerance::DynamicQuorum {
                quorum_size_percent: u8::try_from(percent)
                    .map_err(|_| format!("dynamic-quorum: {percent} % is over 100"))?,
                threshold_time_ms: number(1, "a threshold time in ms")?,
            }
        }
        "majority-quorum" => {
            at_most(1)?;
            PartitionTolerance::MajorityQuorum {
                initial_cluster_size: match rest.first() {
                    Some(_) => number(0, "an initial cluster size")? as usize,
                    None => 1,
                },
                track_max_size: true,
            }
        }
        other => {
            return Err(format!(
            "unknown partition tolerance {other:?}; one of divergence, static-quorum:N[:confirm], \
                 dynamic-quorum:PERCENT:MS, majority-quorum[:N]"
        ))
        }
    };
    Ok(strategy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_bad_ones_say_why() {
        assert_eq!(
            parse_partition_tolerance("divergence"),
            Ok(PartitionTolerance::Divergence)
        );
        assert_eq!(
            parse_partition_tolerance("static-quorum:3:confirm"),
            Ok(PartitionTolerance::StaticQuorum {
                quorum_size: 3,
                startup_confirm: true
            })
        );
        assert_eq!(
            parse_partition_tolerance("dynamic_quorum:60:10000"),
            Ok(PartitionTolerance::DynamicQuorum {
                quorum_size_percent: 60,
                threshold_time_ms: 10_000
            })
        );
        assert_eq!(
            parse_partition_tolerance("majority-quorum:5"),
            Ok(PartitionTolerance::MajorityQuorum {
                initial_cluster_size: 5,
                track_max_size: true
            })
        );
        for (bad, says) in [
            ("quorum", "unknown partition tolerance"),
            ("static-quorum", "needs a quorum size"),
            ("static-quorum:x", "whole number"),
            ("static-quorum:3:maybe", "not `confirm`"),
            ("dynamic-quorum:300:10", "over 100"),
            ("dynamic-quorum:50", "threshold time"),
            ("majority-quorum:5:6", "at most 1"),
            ("divergence:1", "at most 0"),
        ] {
            let e = parse_partition_tolerance(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
