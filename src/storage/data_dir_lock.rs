//! One process per data directory.
//!
//! Two processes writing one data directory break every promise the stores make: each boots
//! believing the files are its own (the second one's boot strips the first one's bindings), and
//! LMDB's own lock only keeps their transactions apart, not their beliefs. So a node takes an
//! exclusive advisory lock (`flock`, through `fs4`) on `<data_dir>/process-hub.lock` before it
//! opens any store and holds it for its whole life; the kernel releases it when the process
//! dies, however it dies, so a crash never leaves a stale lock behind. The file records the
//! holder's pid, which is what a refused second process reports.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fs4::{FileExt, TryLockError};

/// The lock file's name inside the data directory.
pub const DATA_DIR_LOCK_FILE: &str = "process-hub.lock";

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    /// Another process holds the directory.
    #[error(
        "data directory {dir} is in use by another process ({holder}); \
         each node needs a --data-dir of its own"
    )]
    Held {
        /// The data directory.
        dir: PathBuf,
        /// Who holds it, as its lock file says (`pid 1234`), or why that is unknown.
        holder: String,
    },
    /// The directory or its lock file could not be created or locked.
    #[error("cannot lock data directory {dir}: {message}")]
    Io {
        /// The data directory.
        dir: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// The held lock: released when dropped (closing the file releases it) or when the process
/// ends.
#[derive(Debug)]
pub struct DataDirLock {
    dir: PathBuf,
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` if needed and locks it for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, DataDirLockError> {
        let io = |e: &dyn std::fmt::Display| DataDirLockError::Io {
            dir: dir.to_owned(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(&e))?;
        let path = dir.join(DATA_DIR_LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io(&e))?;
        // Named through the trait: `File` has an inherent `try_lock` of its own in newer
        // standard libraries, which method syntax would pick instead.
        match FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(DataDirLockError::Held {
                    dir: dir.to_owned(),
                    holder: holder(&mut file),
                })
            }
            Err(TryLockError::Error(e)) => return Err(io(&e)),
        }
        let pid = std::process::id();
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| writeln!(file, "{pid}"))
            .and_then(|()| file.sync_all())
            .map_err(|e| io(&e))?;
        Ok(Self {
            dir: dir.to_owned(),
            _file: file,
        })
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The holder as its lock file names it.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    // A pid is a few bytes; a longer file is not one this code wrote.
    match file.take(64).read_to_string(&mut text) {
        Ok(_) => match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "a process that has not recorded its pid yet".into(),
        },
        Err(e) => format!("its pid is unreadable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_dropped_lock_frees_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file description, so a second open in this process
        // conflicts exactly as another process would.
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        assert!(DataDirLock::acquire(dir.path()).is_ok());
    }
}
