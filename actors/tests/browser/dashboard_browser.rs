//! The dashboard (`GET /ui`) in a real headless browser against a cluster of three real
//! `process-hub node` processes: Debian's Chromium driven through chromedriver over the W3C
//! WebDriver protocol. The operator opens one node's `/ui`, gives the admin token, and sees the
//! three members, the cluster view with every member's figures (asked over the cluster wire),
//! a child count that follows a start made through the admin API, the starts in the members'
//! histories, the durable and tag columns, a search that finds a child on the node the
//! registry says, a layout where no event's name overlaps its details, and a SIGKILLed member
//! shown as down.
//!
//! The browser must be there: `scripts/test.sh` installs `chromium` and `chromium-driver`
//! when they are missing, and a browser that cannot start fails this test with the driver's
//! log (it is never skipped). With `PROCESS_HUB_UPDATE_SCREENSHOT=1` the screenshot replaces
//! `docs/images/dashboard.png`; otherwise it goes to the cluster's work directory, or to
//! `PROCESS_HUB_SCREENSHOT_DIR` when that is set (with the one taken after the kill).

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
        shot_dir(workdir).join("dashboard.png")
    }
}

/// Where screenshots other than the docs' go.
fn shot_dir(workdir: &Path) -> PathBuf {
    std::env::var_os("PROCESS_HUB_SCREENSHOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workdir.to_path_buf())
}

/// A screenshot of the top of the page (the cluster view first), in a window tall enough for
/// the cards and the panels below them.
fn save_screenshot(browser: &Browser, path: &Path) -> Result<(), webdriver::WebDriverError> {
    browser.set_window_size(1280, 1300)?;
    browser.execute("window.scrollTo(0, 0); return null;")?;
    let png = browser.screenshot()?;
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(path, &png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    eprintln!("dashboard screenshot: {}", path.display());
    Ok(())
}

/// The cluster view's cards as `(node, health)`, read in one script (the cards are drawn
/// again on every refresh).
fn cluster_cards(browser: &Browser) -> Result<Vec<(String, String)>, webdriver::WebDriverError> {
    let value = browser.execute(
        "return Array.from(document.querySelectorAll('[data-testid=cluster-member]'))\
         .map(c => [c.dataset.node, c.dataset.health]);",
    )?;
    Ok(value
        .as_array()
        .map(|cards| {
            cards
                .iter()
                .map(|c| {
                    (
                        c[0].as_str().unwrap_or_default().to_owned(),
                        c[1].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Waits until the cluster view shows exactly `expected` (node -> health).
fn wait_cluster(
    browser: &Browser,
    expected: &[(&str, &str)],
) -> Result<(), webdriver::WebDriverError> {
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(n, h)| ((*n).to_owned(), (*h).to_owned()))
        .collect();
    want.sort();
    browser.wait_for(
        &format!("the cluster view to show {want:?}"),
        DEADLINE,
        |b| {
            let mut cards = cluster_cards(b)?;
            cards.sort();
            Ok((cards == want).then_some(()))
        },
    )
}

/// Layout faults the page shows now, as sentences (empty when there are none): an event's
/// name overlapping its details, a label of the facts wrapped onto a second line, the last
/// round squeezed into a narrow column. Also returns how many events it looked at.
fn layout_faults(browser: &Browser) -> Result<(u64, Vec<String>), webdriver::WebDriverError> {
    let value = browser.execute(
        r#"
        const faults = [];
        const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        const events = document.querySelectorAll('#events li[data-testid=event]');
        for (const li of events) {
          const k = li.querySelector('.kind').getBoundingClientRect();
          const f = li.querySelector('.fields').getBoundingClientRect();
          if (f.width > 0 && overlap(k, f)) faults.push('event ' + li.dataset.kind + ' overlaps its details');
        }
        for (const dt of document.querySelectorAll('.facts dt')) {
          const line = parseFloat(getComputedStyle(dt).lineHeight) || 20;
          if (dt.getBoundingClientRect().height > 1.5 * line) faults.push('the label ' + dt.textContent + ' wraps');
        }
        const last = document.getElementById('last-round').getBoundingClientRect();
        const facts = document.getElementById('last-round').parentElement.getBoundingClientRect();
        if (last.width < 0.9 * facts.width) faults.push('the last round is ' + last.width + ' of ' + facts.width + ' px wide');
        return [events.length, faults];
        "#,
    )?;
    let count = value[0].as_u64().unwrap_or(0);
    let faults = value[1]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|f| f.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok((count, faults))
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

    // The cluster view: every member answered over the wire with its figures.
    let all_ok: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "ok")).collect();
    wait_cluster(&browser, &all_ok).or_fail(&scene);
    wait_text(&browser, "#cluster-count", "3").or_fail(&scene);
    // The footer says when the data came once it came.
    browser
        .wait_for("the footer's update time", DEADLINE, |b| {
            let text = b.text_of("#updated")?;
            Ok((!text.is_empty() && text != "never").then_some(()))
        })
        .or_fail(&scene);

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
    let mut more: Vec<StartSpec> = (2..=12).map(|i| counter(&format!("dash-{i}"))).collect();
    more[0].metadata = Some([("tag".to_owned(), "blue".to_owned())].into());
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

    // The twelve starts are in the members' histories, wherever each child started.
    browser
        .wait_for("twelve starts in the cluster's histories", DEADLINE, |b| {
            let sum = b.execute(
                "return Array.from(document.querySelectorAll('[data-testid=cluster-member] \
                 [data-rate=starts] .rate-count')).reduce((s, n) => s + parseInt(n.textContent, 10), 0);",
            )?;
            Ok((sum.as_u64() == Some(12)).then_some(()))
        })
        .or_fail(&scene);
    // The durable and tag columns.
    browser
        .wait_for("dash-2's durable and tag cells", DEADLINE, |b| {
            let durable = b.text_of("tr[data-id=dash-2] [data-testid=child-durable]")?;
            let tag = b.text_of("tr[data-id=dash-2] [data-testid=child-tag]")?;
            Ok((durable == "no" && tag == "blue").then_some(()))
        })
        .or_fail(&scene);

    // The layout, wide and narrow: no event's name over its details, no label wrapped.
    for (width, height) in [(1280, 900), (420, 900), (1280, 900)] {
        browser.set_window_size(width, height).or_fail(&scene);
        let (events, faults) = layout_faults(&browser).or_fail(&scene);
        assert!(events > 0, "events to look at");
        assert!(faults.is_empty(), "at {width} px: {faults:?}");
    }

    save_screenshot(&browser, &screenshot_path(cluster.workdir())).or_fail(&scene);

    // A member killed without a goodbye shows as down once the cluster sees it so.
    cluster.nodes[2].kill();
    let scene = Scene {
        browser: &browser,
        cluster: &cluster,
    };
    let one_down = [
        (names[0].as_str(), "ok"),
        (names[1].as_str(), "ok"),
        (names[2].as_str(), "down"),
    ];
    wait_cluster(&browser, &one_down).or_fail(&scene);
    wait_text(&browser, "#cluster-down", "1").or_fail(&scene);
    let shots = shot_dir(cluster.workdir());
    save_screenshot(&browser, &shots.join("dashboard-member-down.png")).or_fail(&scene);

    drop(browser);
    cluster.shutdown(Duration::from_secs(10));
}
