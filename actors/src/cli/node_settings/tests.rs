use super::*;

fn flags() -> NodeFlags {
    NodeFlags {
        hub: Some("h".into()),
        name: Some("a".into()),
        listen: Some("127.0.0.1:4000".into()),
        ..Default::default()
    }
}

#[test]
fn node_name_is_name_at_listen_host() {
    let s = flags().resolve().unwrap();
    assert_eq!(s.node_name, "a@127.0.0.1");
    assert_eq!(s.admin.ip().to_string(), "127.0.0.1");
    assert_eq!(s.backend, BackendChoice::Memory);
    assert_eq!(s.cookie, CookieSource::Home, "no built-in cookie");
    assert_eq!(s.tls, None);
}

#[test]
fn cookie_sources_exclude_each_other_and_tls_comes_whole() {
    let mut f = flags();
    f.cookie = Some("c".into());
    f.cookie_file = Some("/etc/cookie".into());
    assert!(f.resolve().unwrap_err().to_string().contains("--cookie"));
    let mut f = flags();
    f.cookie = Some(" ".into());
    assert!(f.resolve().is_err());
    let mut f = flags();
    f.cookie_file = Some("/etc/cookie".into());
    assert_eq!(
        f.resolve().unwrap().cookie,
        CookieSource::File("/etc/cookie".into())
    );
    let mut f = flags();
    f.tls_cert = Some("c.pem".into());
    f.tls_key = Some("k.pem".into());
    let err = f.clone().resolve().unwrap_err().to_string();
    assert!(err.contains("--tls-ca"), "{err}");
    f.tls_ca = Some("ca.pem".into());
    f.tls_server_name = Some("node.example".into());
    let tls = f.resolve().unwrap().tls.expect("tls on");
    assert_eq!(tls.server_name, "node.example");
}

#[test]
fn the_wire_version_defaults_to_compact_and_is_bounded() {
    assert_eq!(flags().resolve().unwrap().wire.max_version, COMPACT_VERSION);
    for version in [OPEN_VERSION, SEALED_VERSION, COMPACT_VERSION] {
        let mut f = flags();
        f.max_wire_version = Some(version);
        assert_eq!(f.resolve().unwrap().wire.max_version, version);
    }
    for version in [0, COMPACT_VERSION + 1] {
        let mut f = flags();
        f.max_wire_version = Some(version);
        let err = f.resolve().unwrap_err().to_string();
        assert!(err.contains("--max-wire-version"), "{err}");
    }
}

#[test]
fn missing_and_bad_values_name_the_flag() {
    let mut f = flags();
    f.hub = None;
    assert!(matches!(
        f.resolve(),
        Err(NodeSettingsError::Missing("hub"))
    ));
    let mut f = flags();
    f.listen = Some("localhost".into());
    let err = f.resolve().unwrap_err().to_string();
    assert!(err.contains("--listen"), "{err}");
    let mut f = flags();
    f.name = Some("a b".into());
    assert!(f.resolve().unwrap_err().to_string().contains("--name"));
    let mut f = flags();
    f.join = vec!["127.0.0.1:1".into(), "nope".into()];
    assert!(f.resolve().unwrap_err().to_string().contains("--join"));
}

#[test]
fn flags_override_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"filehub\"\nname = \"b\"\nlisten = \"127.0.0.1:5000\"\njoin = [\"127.0.0.1:4000\"]\nbackend = \"lmdb\"\n",
    )
    .unwrap();
    let s = NodeFlags {
        name: Some("c".into()),
        config: Some(path.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.hub, "filehub");
    assert_eq!(s.node_name, "c@127.0.0.1");
    assert_eq!(s.join.len(), 1);
    assert_eq!(s.backend, BackendChoice::Lmdb);

    std::fs::write(&path, "hub = \"h\"\nunknown_key = 1\n").unwrap();
    let err = NodeFlags {
        config: Some(path),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(
        matches!(err, NodeSettingsError::ParseConfig { .. }),
        "{err}"
    );
    // The error names the field and its line, and lists the fields there are.
    let message = err.to_string();
    for part in ["unknown field `unknown_key`", "line 2", "`hub`"] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

#[test]
fn replication_comes_from_the_flags_else_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\nreplication_factor = 3\nreplication_model = \"active_active\"\nredundancy_signal = \"all\"\n",
    )
    .unwrap();
    let s = NodeFlags {
        config: Some(path.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.replication_factor, Some(3));
    assert_eq!(
        s.replication_model,
        Some(process_hub::ReplicationModel::ActiveActive)
    );
    assert_eq!(
        s.redundancy_signal,
        Some(process_hub::RedundancySignal::All)
    );
    let s = NodeFlags {
        config: Some(path),
        replication_factor: Some(2),
        replication_model: Some(process_hub::ReplicationModel::ActivePassive),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.replication_factor, Some(2));
    assert_eq!(
        s.replication_model,
        Some(process_hub::ReplicationModel::ActivePassive)
    );
}

#[test]
fn load_balancing_comes_from_the_file_with_the_flags_over_it() {
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
        "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\ndistribution = \"load_balanced\"\n[load_balancer]\npush_interval_ms = 700\nrebalance_batch = 9\n",
    )
    .unwrap();
    let file_only = NodeFlags {
        config: Some(path.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(
        file_only.distribution,
        Some(process_hub::Distribution::LoadBalanced)
    );
    let lb = file_only.load_balancer.unwrap();
    assert_eq!((lb.push_interval_ms, lb.rebalance_batch), (700, 9));
    assert_eq!(lb.rebalance_threshold_percent, 0);

    let cli = Cli::try_parse_from([
        "node",
        "--config",
        path.to_str().unwrap(),
        "--load-push-interval-ms",
        "250",
        "--load-rebalance-threshold-percent",
        "40",
    ])
    .unwrap();
    let lb = cli.flags.resolve().unwrap().load_balancer.unwrap();
    assert_eq!(lb.push_interval_ms, 250, "the flag over the file");
    assert_eq!(lb.rebalance_threshold_percent, 40);
    assert_eq!(lb.rebalance_batch, 9, "the file's other options kept");

    assert!(flags().resolve().unwrap().load_balancer.is_none());
    let cli = Cli::try_parse_from(["node", "--distribution", "load-balanced"]).unwrap();
    assert_eq!(
        cli.flags.distribution,
        Some(process_hub::Distribution::LoadBalanced)
    );
    let err = Cli::try_parse_from(["node", "--distribution", "least-loaded"])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("load-balanced"), "{err}");
}

#[test]
fn replication_flags_parse_and_refuse_unknown_values() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: NodeFlags,
    }
    let cli = Cli::try_parse_from([
        "node",
        "--replication-factor",
        "2",
        "--replication-model",
        "active-passive",
        "--redundancy-signal",
        "active",
    ])
    .unwrap();
    assert_eq!(cli.flags.replication_factor, Some(2));
    assert_eq!(
        cli.flags.redundancy_signal,
        Some(process_hub::RedundancySignal::Active)
    );
    let err = Cli::try_parse_from(["node", "--replication-model", "primary"])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("active-passive"), "{err}");
    assert!(Cli::try_parse_from(["node", "--replication-factor", "two"]).is_err());
}

#[test]
fn partition_tolerance_comes_from_the_file_table_or_the_flag_over_it() {
    use clap::Parser;
    use process_hub::PartitionTolerance;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: NodeFlags,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\n[partition_tolerance]\ntype = \"static_quorum\"\nquorum_size = 2\n",
    )
    .unwrap();
    let file_only = NodeFlags {
        config: Some(path.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(
        file_only.partition_tolerance,
        Some(PartitionTolerance::StaticQuorum {
            quorum_size: 2,
            startup_confirm: false
        })
    );
    let cli = Cli::try_parse_from([
        "node",
        "--config",
        path.to_str().unwrap(),
        "--partition-tolerance",
        "majority-quorum:5",
    ])
    .unwrap();
    assert_eq!(
        cli.flags.resolve().unwrap().partition_tolerance,
        Some(PartitionTolerance::MajorityQuorum {
            initial_cluster_size: 5,
            track_max_size: true
        })
    );
    assert!(flags().resolve().unwrap().partition_tolerance.is_none());
    let err = Cli::try_parse_from(["node", "--partition-tolerance", "quorum"])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown partition tolerance"), "{err}");
}

#[test]
fn log_format_and_isolation_threshold_come_from_the_flags_else_the_file() {
    let s = flags().resolve().unwrap();
    assert_eq!(s.log_format, LogFormat::Text);
    assert_eq!(
        s.isolated_after,
        process_hub::core::isolation::DEFAULT_ISOLATED_AFTER
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"h\"\nname = \"b\"\nlisten = \"127.0.0.1:5000\"\nlog_format = \"json\"\nisolated_after_ms = 2500\n",
    )
    .unwrap();
    let from_file = NodeFlags {
        config: Some(path.clone()),
        ..Default::default()
    };
    let s = from_file.clone().resolve().unwrap();
    assert_eq!(s.log_format, LogFormat::Json);
    assert_eq!(s.isolated_after, std::time::Duration::from_millis(2500));
    let s = NodeFlags {
        log_format: Some(LogFormat::Text),
        isolated_after_ms: Some(700),
        ..from_file
    }
    .resolve()
    .unwrap();
    assert_eq!(s.log_format, LogFormat::Text, "the flag wins");
    assert_eq!(s.isolated_after, std::time::Duration::from_millis(700));
    for out_of_range in [0, 99, 3_600_001] {
        let mut f = flags();
        f.isolated_after_ms = Some(out_of_range);
        let err = f.resolve().unwrap_err().to_string();
        assert!(err.contains("--isolated-after-ms"), "{err}");
    }
    std::fs::write(&path, "hub = \"h\"\nlog_format = \"xml\"\n").unwrap();
    let err = NodeFlags {
        config: Some(path),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(
        matches!(err, NodeSettingsError::ParseConfig { .. }),
        "{err}"
    );
}

#[test]
fn the_probe_listener_comes_from_the_flag_else_the_file_and_is_off_by_default() {
    assert_eq!(flags().resolve().unwrap().probe, None);
    let mut f = flags();
    f.probe = Some("0.0.0.0:9001".into());
    assert_eq!(
        f.resolve().unwrap().probe,
        Some("0.0.0.0:9001".parse().unwrap())
    );
    let mut f = flags();
    f.probe = Some("probe-host:9001".into());
    let err = f.resolve().unwrap_err().to_string();
    assert!(err.contains("--probe"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"h\"\nname = \"b\"\nlisten = \"127.0.0.1:5000\"\nprobe = \"127.0.0.1:9001\"\n",
    )
    .unwrap();
    let s = NodeFlags {
        config: Some(path),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.probe, Some("127.0.0.1:9001".parse().unwrap()));
}

#[test]
fn discovery_flags_parse_and_reach_the_cluster_config() {
    let mut f = flags();
    f.discovery = Some("dns:peers.hub.test".into());
    f.discovery_interval_ms = Some(500);
    f.dns_server = Some("10.233.0.5:53".into());
    f.join = vec!["127.0.0.1:4001".into()];
    let s = f.resolve().unwrap();
    assert_eq!(
        s.discovery,
        Some(process_hub::Discovery::Dns {
            name: "peers.hub.test".into(),
            port: None,
            interval: std::time::Duration::from_millis(500),
        })
    );
    assert_eq!(s.dns_server, Some("10.233.0.5:53".parse().unwrap()));
    let c = crate::node::cluster_config(&s, "secret".into());
    assert_eq!(c.discovery, s.discovery, "discovery beside --join");
    assert_eq!(c.seeds, vec!["127.0.0.1:4001"]);
    assert_eq!(c.dns_server, s.dns_server);

    let mut f = flags();
    f.discovery = Some("dns-srv:_ph._tcp.hub.test".into());
    let s = f.resolve().unwrap();
    assert_eq!(
        s.discovery,
        Some(process_hub::Discovery::DnsSrv {
            name: "_ph._tcp.hub.test".into(),
            interval: process_hub::cluster::discovery::DEFAULT_DISCOVERY_INTERVAL,
        })
    );
    assert_eq!(s.dns_server, None, "the system's resolver by default");
}

#[test]
fn a_malformed_discovery_is_a_clear_error_naming_the_flag() {
    for (spec, interval, server, flag) in [
        ("peers.hub.test", None, None, "--discovery"),
        ("dns:peers:0", None, None, "--discovery"),
        ("dns:bad name", None, None, "--discovery"),
        ("dns-srv:", None, None, "--discovery"),
        ("dns:peers", Some(10), None, "--discovery-interval-ms"),
        ("dns:peers", None, Some("ns.local"), "--dns-server"),
    ] {
        let mut f = flags();
        f.discovery = Some(spec.into());
        f.discovery_interval_ms = interval;
        f.dns_server = server.map(Into::into);
        let err = f.resolve().unwrap_err().to_string();
        assert!(err.contains(flag), "{spec}: {err}");
    }
    // The interval and the server mean nothing without a name to resolve.
    let mut f = flags();
    f.dns_server = Some("10.233.0.5:53".into());
    let err = f.resolve().unwrap_err().to_string();
    assert!(
        err.contains("--dns-server") && err.contains("--discovery"),
        "{err}"
    );
    let mut f = flags();
    f.discovery_interval_ms = Some(1000);
    let err = f.resolve().unwrap_err().to_string();
    assert!(err.contains("--discovery-interval-ms"), "{err}");
}

#[test]
fn the_name_template_makes_the_identity_from_the_listen_address() {
    let mut f = flags();
    f.name = Some("node-{ip}".into());
    f.listen = Some("10.233.0.7:7100".into());
    let s = f.resolve().unwrap();
    assert_eq!(s.node_name, "node-10.233.0.7@10.233.0.7");
    assert_eq!(s.data_dir, PathBuf::from("./data/node-10.233.0.7"));
    let mut f = flags();
    f.name = Some("{hostname}".into());
    let s = f.resolve().unwrap();
    assert!(s.node_name.ends_with("@127.0.0.1"), "{}", s.node_name);
    let mut f = flags();
    f.name = Some("{pod}".into());
    let err = f.resolve().unwrap_err().to_string();
    assert!(
        err.contains("--name") && err.contains("{hostname}"),
        "{err}"
    );
}

#[test]
fn discovery_settings_come_from_the_config_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "hub = \"h\"\nname = \"n-{ip}\"\nlisten = \"127.0.0.1:4000\"\n\
         discovery = \"dns:peers.hub.test:7100\"\ndiscovery_interval_ms = 250\n\
         dns_server = \"127.0.0.1:5353\"\n",
    )
    .unwrap();
    let s = NodeFlags {
        config: Some(path),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(s.node_name, "n-127.0.0.1@127.0.0.1");
    assert_eq!(
        s.discovery.map(|d| (d.to_string(), d.interval())),
        Some((
            "dns:peers.hub.test:7100".to_owned(),
            std::time::Duration::from_millis(250)
        ))
    );
    assert_eq!(s.dns_server, Some("127.0.0.1:5353".parse().unwrap()));
}
