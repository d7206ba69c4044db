//! The dashboard (`GET /ui`) in a real headless browser against a cluster of three real
//! `process-hub node` processes: Debian's Chromium driven through chromedriver over the W3C
//! WebDriver protocol. The operator opens one node's `/ui`, gives the admin token, and sees the
//! three members, a child count that follows a start made through the admin API, and a
//! search that finds a child on the node the registry says.
//!
//! The browser must be there: `scripts/test.sh` installs `chromium` and `chromium-driver`
//! when they are missing, and a browser that cannot start fails this test with the driver's
//! log (it is never skipped). With `PROCESS_HUB_UPDATE_SCREENSHOT=1` the screenshot replaces
//! `docs/images/dashboard.png`; otherwise it goes to the cluster's work directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::webdriver::{self, Browser, ENTER};
use process_hub::admin::StartSpec;
use process_hub_actors::harness::{free_port, ClusterOptions, LocalCluster};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

/// How long anything awaited here may take (generous: CI machines are shared).
const DEADLINE: Duration = Duration::from_secs(60);

const TOKEN: &str = "dashboard-test-token-0123456789abcdef";

fn counter(id: &str) -> StartSpec {
    serde_json::from_value(serde_json::json!({"id": id, "kind": "counter", "args": {"start": 1}}))
        .expect("a counter spec")
}

/// Waits until the text of `css` is `expected`.
fn wait_text(
    browser: &Browser,
    css: &str,
    expected: &str,
) -> Result<(), webdriver::WebDriverError> {
    browser.wait_for(&format!("{css} to read {expected:?}"), DEADLINE, |b| {
        let text = b.text_of(css)?;
        Ok((text == expected).then_some(()))
    })
}

/// Waits until the text of `css` starts with `expected`.
fn wait_prefix(
    browser: &Browser,
    css: &str,
    expected: &str,
) -> Result<(), webdriver::WebDriverError> {
    browser.wait_for(
        &format!("{css} to start with {expected:?}"),
        DEADLINE,
        |b| {
            let text = b.text_of(css)?;
            Ok(text.starts_with(expected).then_some(()))
        },
    )
}

fn screenshot_path(workdir: &Path) -> PathBuf {
    if std::env::var("PROCESS_HUB_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images/dashboard.png")
    } else {
        workdir.join("dashboard.png")
    }
}

/// What a failure shows: the page's text, the driver's log and the nodes' logs.
struct Scene<'a> {
    browser: &'a Browser,
    cluster: &'a LocalCluster,
}

trait OrFail<T> {
    fn or_fail(self, scene: &Scene<'_>) -> T;
}

impl<T> OrFail<T> for Result<T, webdriver::WebDriverError> {
    fn or_fail(self, scene: &Scene<'_>) -> T {
        self.unwrap_or_else(|e| {
            let page = scene.browser.text_of("body").unwrap_or_default();
            panic!(
                "{e}\nthe page reads:\n{page}\nchromedriver:\n{}\nnodes:\n{}",
                scene.browser.driver_log(),
                scene.cluster.log_tails(20)
            )
        })
    }
}

#[test]
fn an_operator_watches_the_cluster_on_the_dashboard() {
    let options = ClusterOptions {
        admin_token: Some(TOKEN.into()),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 3, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(30)));
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let admin = cluster.nodes[0].client().with_token(TOKEN);
    let browser = Browser::start(cluster.workdir(), free_port().expect("a port"))
        .unwrap_or_else(|e| panic!("the browser does not start: {e}"));
    let scene = Scene {
        browser: &browser,
        cluster: &cluster,
    };

    // The page is served without a token and asks for it.
    let url = format!("http://{}/ui", cluster.nodes[0].admin);
    browser.navigate(&url).or_fail(&scene);
    let token_input = browser
        .wait_for("the token field", DEADLINE, |b| {
            let input = b.find("#token-input")?;
            Ok(b.displayed(&input)?.then_some(input))
        })
        .or_fail(&scene);
    assert_eq!(
        browser.focused_id().or_fail(&scene),
        "token-input",
        "the token field has the focus"
    );
    browser
        .send_keys(&token_input, &format!("{TOKEN}{ENTER}"))
        .or_fail(&scene);

    // Three members, each up, this node among them.
    wait_text(&browser, "#member-count", "3").or_fail(&scene);
    // The rows are drawn again on every refresh: read them within one probe.
    let shown: Vec<String> = browser
        .wait_for("three member rows", DEADLINE, |b| {
            let rows = b.find_all("[data-testid=member-row]")?;
            let texts = rows
                .iter()
                .map(|r| b.text(r))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((texts.len() == 3).then_some(texts))
        })
        .or_fail(&scene);
    for name in &names {
        assert!(
            shown
                .iter()
                .any(|row| row.contains(name.as_str()) && row.contains("up")),
            "{name} is an up member: {shown:?}"
        );
    }
    assert_eq!(browser.text_of("#node-name").or_fail(&scene), names[0]);
    wait_text(&browser, "#child-count", "0").or_fail(&scene);
    wait_text(&browser, "#declared-state", "off").or_fail(&scene);

    // A start through the admin API shows in the count, live.
    // (`AdminClient::start_one` sends no token: the batch form does.)
    let started = admin.start(&[counter("dash-1")]).expect("the start");
    assert_eq!(started.started.len(), 1, "{started:?}");
    wait_text(&browser, "#child-count", "1").or_fail(&scene);
    wait_text(&browser, "#live-mode", "live (stream)").or_fail(&scene);

    // The search finds it where the registry says it runs; Enter runs the search.
    let host = admin.child("dash-1").expect("the registry knows it").nodes[0]
        .node
        .clone();
    let search = browser.find("#search-input").or_fail(&scene);
    browser
        .send_keys(&search, &format!("dash-1{ENTER}"))
        .or_fail(&scene);
    wait_prefix(&browser, "[data-testid=search-nodes]", &host).or_fail(&scene);
    wait_text(&browser, "[data-testid=search-why]", "ring_owner").or_fail(&scene);

    // An unknown id says so.
    let search = browser.find("#search-input").or_fail(&scene);
    browser
        .send_keys(&search, &format!("-nope{ENTER}"))
        .or_fail(&scene);
    browser
        .wait_for("the not-found message", DEADLINE, |b| {
            let text = b.text_of("[data-testid=search-error]")?;
            Ok(text.contains("dash-1-nope").then_some(()))
        })
        .or_fail(&scene);

    // A few more children, so that the per-node and per-kind bars have something to show.
    let more: Vec<StartSpec> = (2..=12).map(|i| counter(&format!("dash-{i}"))).collect();
    let started = admin.start(&more).expect("the batch");
    assert_eq!(started.started.len(), more.len(), "{started:?}");
    wait_text(&browser, "#child-count", "12").or_fail(&scene);
    let kinds = browser.text_of("#per-kind").or_fail(&scene);
    assert!(kinds.contains("counter") && kinds.contains("12"), "{kinds}");
    let search = browser.find("#search-input").or_fail(&scene);
    browser
        .clear(&search)
        .and_then(|()| browser.send_keys(&search, "dash-1"))
        .and_then(|()| browser.click(&browser.find("#search-submit")?))
        .or_fail(&scene);
    wait_prefix(&browser, "[data-testid=search-nodes]", &host).or_fail(&scene);

    let png = browser.screenshot().or_fail(&scene);
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = screenshot_path(cluster.workdir());
    std::fs::write(&path, &png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    eprintln!("dashboard screenshot: {}", path.display());

    drop(browser);
    let mut cluster = cluster;
    cluster.shutdown(Duration::from_secs(10));
}
