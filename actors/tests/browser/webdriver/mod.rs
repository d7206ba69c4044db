//! A tiny W3C WebDriver client over HTTP (`ureq`), enough to drive Debian's Chromium through
//! chromedriver: a session, navigation, elements by CSS selector, their text, keys, clicks and
//! screenshots. The browser tests need no more, and a client of our own keeps them free of a
//! browser-automation dependency tree.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The W3C key code of Enter (WebDriver "Keys", U+E007).
pub const ENTER: &str = "\u{E007}";

/// The property naming an element in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where the browser and its driver are looked for (Debian's `chromium` and
/// `chromium-driver` packages), unless `PROCESS_HUB_CHROMIUM` / `PROCESS_HUB_CHROMEDRIVER`
/// name others.
fn program(env: &str, default: &str) -> PathBuf {
    std::env::var_os(env).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// A failed WebDriver command, with what the driver said.
#[derive(Debug)]
pub struct WebDriverError(pub String);

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, WebDriverError>;

/// A chromedriver process and one headless Chromium session in it; both end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    log: PathBuf,
}

/// One element of the page.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on a free loopback port (its log in `workdir`) and a headless
    /// Chromium session in it. Fails with a message that names what is missing and how to
    /// install it.
    pub fn start(workdir: &Path, port: u16) -> Result<Self> {
        let chromium = program("PROCESS_HUB_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = program("PROCESS_HUB_CHROMEDRIVER", "/usr/bin/chromedriver");
        for (what, path) in [("chromium", &chromium), ("chromedriver", &chromedriver)] {
            if !path.exists() {
                return Err(WebDriverError(format!(
                    "{what} is not at {} (scripts/test.sh installs it: apt-get install chromium chromium-driver)",
                    path.display()
                )));
            }
        }
        let log = workdir.join("chromedriver.log");
        let log_file = File::create(&log).map_err(|e| WebDriverError(e.to_string()))?;
        let err_file = log_file
            .try_clone()
            .map_err(|e| WebDriverError(e.to_string()))?;
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| WebDriverError(format!("cannot run {}: {e}", chromedriver.display())))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build()
            .into();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut browser = Self {
            driver,
            base: format!("http://{addr}"),
            session: String::new(),
            agent,
            log,
        };
        browser.wait_ready()?;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--window-size=1280,900", "--disable-dev-shm-usage"],
            }
        }}});
        let created = browser
            .command("POST", "/session", Some(capabilities))
            .map_err(|e| {
                WebDriverError(format!(
                    "Chromium did not start: {e}\nchromedriver's log:\n{}",
                    browser.driver_log()
                ))
            })?;
        browser.session = created["sessionId"]
            .as_str()
            .ok_or_else(|| WebDriverError(format!("no sessionId in {created}")))?
            .to_owned();
        Ok(browser)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(status) = self.command("GET", "/status", None) {
                if status["ready"] == true {
                    return Ok(());
                }
            }
            if let Ok(Some(exit)) = self.driver.try_wait() {
                return Err(WebDriverError(format!(
                    "chromedriver exited at startup ({exit}):\n{}",
                    self.driver_log()
                )));
            }
            if Instant::now() > deadline {
                return Err(WebDriverError(format!(
                    "chromedriver did not become ready:\n{}",
                    self.driver_log()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The driver's log so far.
    pub fn driver_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends one command and returns its `value`, or the driver's error.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("{}{}", self.base, path);
        let sent = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self.agent.post(&url).send_json(body.unwrap_or(json!({}))),
        };
        let mut response = sent.map_err(|e| WebDriverError(format!("{method} {path}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| WebDriverError(format!("{method} {path}: {e}")))?;
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| WebDriverError(format!("{method} {path}: not JSON ({e}): {text}")))?;
        let value = answer.get("value").cloned().unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            Err(WebDriverError(format!(
                "{method} {path}: {status} {}: {}",
                value["error"], value["message"]
            )))
        }
    }

    fn session_command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        self.command(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Loads `url` and waits for the page's load event.
    pub fn navigate(&self, url: &str) -> Result<()> {
        self.session_command("POST", "/url", Some(json!({ "url": url })))
            .map(drop)
    }

    /// The elements matching `css`, in document order.
    pub fn find_all(&self, css: &str) -> Result<Vec<Element>> {
        let found = self.session_command(
            "POST",
            "/elements",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        Ok(found
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_owned())))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The first element matching `css`.
    pub fn find(&self, css: &str) -> Result<Element> {
        self.find_all(css)?
            .into_iter()
            .next()
            .ok_or_else(|| WebDriverError(format!("no element matches {css:?}")))
    }

    /// The element's rendered text (empty when it is hidden).
    pub fn text(&self, element: &Element) -> Result<String> {
        self.session_command("GET", &format!("/element/{}/text", element.0), None)
            .map(|v| v.as_str().unwrap_or_default().to_owned())
    }

    /// The text of the first element matching `css`.
    pub fn text_of(&self, css: &str) -> Result<String> {
        self.text(&self.find(css)?)
    }

    /// Whether the element is displayed.
    pub fn displayed(&self, element: &Element) -> Result<bool> {
        self.session_command("GET", &format!("/element/{}/displayed", element.0), None)
            .map(|v| v == true)
    }

    /// Types `keys` into the element (`ENTER` for the Enter key).
    pub fn send_keys(&self, element: &Element, keys: &str) -> Result<()> {
        self.session_command(
            "POST",
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": keys })),
        )
        .map(drop)
    }

    /// Empties an input.
    pub fn clear(&self, element: &Element) -> Result<()> {
        self.session_command("POST", &format!("/element/{}/clear", element.0), None)
            .map(drop)
    }

    /// Clicks the element.
    pub fn click(&self, element: &Element) -> Result<()> {
        self.session_command("POST", &format!("/element/{}/click", element.0), None)
            .map(drop)
    }

    /// The id attribute of the element that has the focus.
    pub fn focused_id(&self) -> Result<String> {
        let active = self.session_command("GET", "/element/active", None)?;
        let id = active[ELEMENT].as_str().unwrap_or_default();
        self.session_command("GET", &format!("/element/{id}/attribute/id"), None)
            .map(|v| v.as_str().unwrap_or_default().to_owned())
    }

    /// Runs `script` (a function body: `return ...;`) in the page and returns its value.
    pub fn execute(&self, script: &str) -> Result<Value> {
        self.session_command(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    /// Resizes the browser's window (CSS pixels).
    pub fn set_window_size(&self, width: u32, height: u32) -> Result<()> {
        self.session_command(
            "POST",
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        )
        .map(drop)
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Result<Vec<u8>> {
        let encoded = self.session_command("GET", "/screenshot", None)?;
        base64_decode(encoded.as_str().unwrap_or_default())
            .ok_or_else(|| WebDriverError("the screenshot is not base64".into()))
    }

    /// Polls `probe` until it returns `Some` (a failed command counts as not yet), or fails
    /// after `timeout` with the last thing seen.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&Self) -> Result<Option<T>>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("nothing yet");
        loop {
            match probe(self) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(e) => last = e.0,
            }
            if Instant::now() > deadline {
                return Err(WebDriverError(format!(
                    "timed out after {timeout:?} waiting for {what} (last error: {last})"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.command("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (with or without padding) to bytes; `None` on any other character.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let clean = clean
        .strip_suffix(b"==")
        .or_else(|| clean.strip_suffix(b"="))
        .unwrap_or(&clean);
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= value(*c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[test]
fn base64_round_trips_the_rfc_vectors() {
    for (plain, coded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(
            base64_decode(coded).as_deref(),
            Some(plain.as_bytes()),
            "{coded}"
        );
    }
    assert_eq!(base64_decode("Zm9v!"), None);
}
