//! The tests that drive a browser (Debian's Chromium through chromedriver, which
//! `bash scripts/test.sh` installs): the admin dashboard of a real node. A binary of their own,
//! so that the other tiers run without a browser.

mod dashboard_browser;
mod webdriver;
