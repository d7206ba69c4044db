//! The node's secrets on disk: the cluster cookie and the admin token.
//!
//! There is no built-in cookie: a node takes `--cookie`, or `--cookie-file PATH`, or, like
//! Erlang's `~/.erlang.cookie`, the file `$HOME/.process-hub.cookie`, created with a random
//! cookie and mode 0600 the first time it is needed. Every secret file must be a regular file
//! that neither group nor others may access (the check `ssh` makes of a private key): a secret
//! other local users can read is not a secret, and a node refuses it rather than run with it.
//! A secret file is read up to [`MAX_SECRET_BYTES`]: whatever is on disk is untrusted.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rand::distributions::{Alphanumeric, DistString};

/// The largest secret file read.
pub const MAX_SECRET_BYTES: u64 = 4096;

/// The name of the default cookie file in `$HOME`.
pub const HOME_COOKIE: &str = ".process-hub.cookie";

/// Where the node's cookie comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CookieSource {
    /// `--cookie SECRET`.
    Given(String),
    /// `--cookie-file PATH`.
    File(PathBuf),
    /// `$HOME/.process-hub.cookie`, created when missing.
    Home,
}

/// Why a secret could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file cannot be read or created.
    #[error("{what} {path}: {source}")]
    Io {
        /// Which secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Group or others may access the file.
    #[error("{what} {path} is accessible by group or others (mode {mode:o}); refusing it: run `chmod 600 {path}`")]
    Exposed {
        /// Which secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not what a secret file should be (a directory, empty, too long, not text).
    #[error("{what} {path}: {reason}")]
    Invalid {
        /// Which secret.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No cookie was given and there is no home directory to keep one in.
    #[error("no --cookie or --cookie-file, and $HOME is not set to keep {HOME_COOKIE} in")]
    NoHome,
}

/// A fresh random secret (32 alphanumeric characters, ~190 bits).
pub fn random_secret() -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), 32)
}

/// Reads the secret in `path`: a regular file of at most [`MAX_SECRET_BYTES`] that neither
/// group nor others may access, holding one line of text (surrounding whitespace dropped).
pub fn read_secret_file(what: &'static str, path: &Path) -> Result<String, SecretError> {
    let io = |source| SecretError::Io {
        what,
        path: path.to_owned(),
        source,
    };
    let invalid = |reason: &str| SecretError::Invalid {
        what,
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let file = File::open(path).map_err(io)?;
    ensure_private(what, path, &file)?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| invalid("not UTF-8 text"))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(invalid(&format!("longer than {MAX_SECRET_BYTES} bytes")));
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(invalid("empty"));
    }
    Ok(secret.to_owned())
}

/// Refuses `file` (opened from `path`) unless it is a regular file that neither group nor
/// others may access.
fn ensure_private(what: &'static str, path: &Path, file: &File) -> Result<(), SecretError> {
    let meta = file.metadata().map_err(|source| SecretError::Io {
        what,
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(SecretError::Invalid {
            what,
            path: path.to_owned(),
            reason: "not a regular file".into(),
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed {
            what,
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Refuses a private key file (`--tls-key`) that is not a regular file private to its owner.
pub fn check_private_file(what: &'static str, path: &Path) -> Result<(), SecretError> {
    let file = File::open(path).map_err(|source| SecretError::Io {
        what,
        path: path.to_owned(),
        source,
    })?;
    ensure_private(what, path, &file)
}

/// The cookie `source` names; for [`CookieSource::Home`] the file in `home` (normally
/// `$HOME`), created with a random cookie and mode 0600 when missing.
pub fn cookie(source: &CookieSource, home: Option<&Path>) -> Result<String, SecretError> {
    match source {
        CookieSource::Given(cookie) => Ok(cookie.clone()),
        CookieSource::File(path) => read_secret_file("cookie file", path),
        CookieSource::Home => {
            let home = home
                .filter(|h| !h.as_os_str().is_empty())
                .ok_or(SecretError::NoHome)?;
            let path = home.join(HOME_COOKIE);
            create_if_missing(&path)?;
            read_secret_file("cookie file", &path)
        }
    }
}

/// Writes a random cookie to `path` unless a file is there (whoever creates it first wins;
/// every node of the host then reads the same one). The cookie is written whole to a private
/// file beside it, then linked into place (a link never replaces a file): a node starting at the
/// same moment sees either no cookie or the whole one, never an empty file.
fn create_if_missing(path: &Path) -> Result<(), SecretError> {
    let io = |source| SecretError::Io {
        what: "cookie file",
        path: path.to_owned(),
        source,
    };
    if path.exists() {
        return Ok(());
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let nonce = random_secret();
    let staged = path.with_file_name(format!(
        "{}.{}.{}.tmp",
        name.as_deref().unwrap_or(HOME_COOKIE),
        std::process::id(),
        &nonce[..8]
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)
        .and_then(|mut file| {
            file.write_all(format!("{}\n", random_secret()).as_bytes())?;
            file.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&staged);
        return Err(io(e));
    }
    let linked = std::fs::hard_link(&staged, path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => {
            tracing::info!(path = %path.display(), "created a random cluster cookie");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_secret_file_must_be_private_nonempty_and_small() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write(&path, "s3cret\n", 0o600);
        assert_eq!(read_secret_file("cookie file", &path).unwrap(), "s3cret");
        for mode in [0o644, 0o640, 0o604, 0o620] {
            write(&path, "s3cret\n", mode);
            let err = read_secret_file("cookie file", &path).unwrap_err();
            assert!(
                matches!(err, SecretError::Exposed { .. }),
                "{mode:o}: {err}"
            );
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        write(&path, " \n", 0o600);
        assert!(matches!(
            read_secret_file("cookie file", &path),
            Err(SecretError::Invalid { .. })
        ));
        write(&path, &"x".repeat(5000), 0o400);
        assert!(matches!(
            read_secret_file("cookie file", &path),
            Err(SecretError::Invalid { .. })
        ));
        assert!(matches!(
            read_secret_file("cookie file", dir.path()),
            Err(SecretError::Exposed { .. } | SecretError::Invalid { .. })
        ));
    }

    #[test]
    fn nodes_starting_at_once_read_one_whole_cookie() {
        for _ in 0..20 {
            let home = tempfile::tempdir().unwrap();
            let readers: Vec<_> = (0..8)
                .map(|_| {
                    let home = home.path().to_owned();
                    std::thread::spawn(move || cookie(&CookieSource::Home, Some(&home)))
                })
                .collect();
            let cookies: Vec<String> = readers
                .into_iter()
                .map(|r| r.join().unwrap().expect("every node reads the cookie"))
                .collect();
            assert!(cookies.iter().all(|c| c == &cookies[0] && c.len() == 32));
            let left: Vec<_> = std::fs::read_dir(home.path()).unwrap().collect();
            assert_eq!(left.len(), 1, "no staged file is left behind");
        }
    }

    #[test]
    fn the_home_cookie_is_created_once_private_and_then_reused() {
        let home = tempfile::tempdir().unwrap();
        let first = cookie(&CookieSource::Home, Some(home.path())).unwrap();
        assert_eq!(first.len(), 32);
        let path = home.path().join(HOME_COOKIE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            cookie(&CookieSource::Home, Some(home.path())).unwrap(),
            first
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            cookie(&CookieSource::Home, Some(home.path())),
            Err(SecretError::Exposed { .. })
        ));
        assert!(matches!(
            cookie(&CookieSource::Home, None),
            Err(SecretError::NoHome)
        ));
        assert_ne!(random_secret(), random_secret());
    }
}
