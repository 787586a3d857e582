//! The on-disk CUBIN cache.
//!
//! One file per compiled kernel, named by the hash of everything that determines the CUBIN
//! (source, options, NVRTC and NVSHMEM versions, architecture). Entries are written to a temporary
//! file in the same directory and renamed into place, so PEs compiling the same kernel at once
//! each see either no entry or a whole one. Every entry carries its key and a checksum of its
//! payload, so a torn or corrupt file is detected, dropped and rebuilt.
//!
//! The cache only saves time, so it never fails a launch: a directory that cannot be opened
//! (read-only, not a directory) means no disk cache, and an entry that cannot be read, locked or
//! written (a full disk) is skipped; either prints one warning line per cache ([`warning`]) and the
//! kernels are compiled and kept in memory.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// First bytes of every entry (format version in the last byte).
pub(super) const MAGIC: &[u8; 8] = b"PGASCUB1";
/// magic + key hash + payload length + payload checksum.
const HEADER_LEN: usize = 8 + 32 + 8 + 32;

/// The hash that names a cache entry (made in `key.rs`, from every input of the CUBIN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of a finished hash (the inputs are hashed in `key.rs`).
    pub(super) fn from_hash(hash: [u8; 32]) -> CacheKey {
        CacheKey(hash)
    }

    /// The key's 32 bytes (what a batch link stores).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A key from the 32 bytes [`CacheKey::as_bytes`] gave; `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<CacheKey> {
        bytes.try_into().ok().map(CacheKey)
    }

    /// The key in lowercase hexadecimal, 64 digits.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn file_name(&self) -> String {
        format!("{}.cubin", self.hex())
    }
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A whole, verified entry.
    Hit(Vec<u8>),
    /// No entry.
    Miss,
    /// An entry that failed verification; it has been removed and must be rebuilt.
    Corrupt,
}

/// A directory of cached CUBINs.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    /// Whether a failure of this cache was reported already (one warning line per cache).
    warned: AtomicBool,
}

/// Makes temporary file names unique among the threads of one process (the pid separates
/// processes).
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    /// The directory from the environment: `None` when `PGAS_CACHE=off`, else `PGAS_CACHE_DIR`,
    /// else `<user cache dir>/pgas/kernels` (`~/.cache/pgas/kernels`).
    pub fn dir_from_env() -> Option<PathBuf> {
        if std::env::var_os("PGAS_CACHE").is_some_and(|v| v == "off" || v == "0") {
            return None;
        }
        if let Some(dir) = std::env::var_os("PGAS_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        let base = dirs::cache_dir().unwrap_or_else(std::env::temp_dir);
        Some(base.join("pgas").join("kernels"))
    }

    /// Opens (creating it if needed) the cache in `dir`, and checks that it can be written:
    /// an unusable directory is an [`Error::Cache`] naming it, here rather than at the first
    /// store.
    pub fn open(dir: impl Into<PathBuf>) -> Result<DiskCache> {
        let cache = DiskCache {
            dir: dir.into(),
            warned: AtomicBool::new(false),
        };
        fs::create_dir_all(&cache.dir).map_err(|e| cache.err("creating the directory", e))?;
        let probe = cache.tmp_path("probe");
        fs::write(&probe, b"")
            .and_then(|_| fs::remove_file(&probe))
            .map_err(|e| cache.err("writing a file", e))?;
        Ok(cache)
    }

    /// [`DiskCache::open`], or `None` after printing one warning line when the directory is
    /// unusable: the JIT then keeps its kernels in memory only.
    pub fn open_or_warn(dir: impl Into<PathBuf>) -> Option<DiskCache> {
        DiskCache::open(dir).map_err(|e| warn(&e)).ok()
    }

    /// [`DiskCache::load`], with a failure to read taken as a miss (and reported once).
    pub fn load_or_miss(&self, key: &CacheKey) -> Lookup {
        self.load(key).unwrap_or_else(|e| {
            self.warn_once(&e);
            Lookup::Miss
        })
    }

    /// [`DiskCache::store`], with a failure (a full disk, a directory made read-only) reported
    /// once and otherwise ignored: the caller keeps the CUBIN in memory.
    pub fn store_or_warn(&self, key: &CacheKey, cubin: &[u8]) {
        if let Err(e) = self.store(key, cubin) {
            self.warn_once(&e);
        }
    }

    /// [`DiskCache::lock`] (`wait`) or [`DiskCache::try_lock`]: `Some(None)` when the lock
    /// cannot be taken for a reason other than another holder (reported once); building
    /// without it only risks a second process compiling the same kernel.
    pub fn lock_or_warn(&self, key: &CacheKey, wait: bool) -> Option<Option<EntryLock>> {
        match self.flock(key, wait) {
            Ok(Some(l)) => Some(Some(l)),
            Ok(None) => None,
            Err(e) => {
                self.warn_once(&e);
                Some(None)
            }
        }
    }

    /// Whether a failure of this cache has been reported.
    pub fn warned(&self) -> bool {
        self.warned.load(Ordering::Relaxed)
    }

    fn warn_once(&self, e: &Error) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            warn(e);
        }
    }

    /// The directory this cache lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the entry for `key` lives.
    pub fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Reads and verifies the entry for `key`; a corrupt one is removed.
    pub fn load(&self, key: &CacheKey) -> Result<Lookup> {
        let path = self.path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(e) => return Err(self.err("reading an entry", e)),
        };
        match decode(key, &bytes) {
            Some(payload) => Ok(Lookup::Hit(payload.to_vec())),
            None => {
                // Another PE may already have replaced it with a good entry; removing that one
                // too only costs a rebuild.
                match fs::remove_file(&path) {
                    Ok(()) => Ok(Lookup::Corrupt),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Lookup::Corrupt),
                    Err(e) => Err(self.err("removing a corrupt entry", e)),
                }
            }
        }
    }

    /// Writes the entry for `key` atomically (temporary file, then rename).
    pub fn store(&self, key: &CacheKey, cubin: &[u8]) -> Result<()> {
        self.store_with(key, |w| write_entry(w, key, cubin))
    }

    /// Writes through `write` into a temporary file and renames it into place; on any error the
    /// temporary file is removed and the error names the directory.
    fn store_with(
        &self, key: &CacheKey, write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        let tmp = self.tmp_path(&key.file_name());
        let result = (|| {
            let file = match fs::File::create(&tmp) {
                // The directory was removed while in use (say `rm -rf ~/.cache/pgas`): recreate it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(&self.dir)?;
                    fs::File::create(&tmp)?
                }
                other => other?,
            };
            let mut f = io::BufWriter::new(file);
            write(&mut f)?;
            f.into_inner().map_err(|e| e.into_error())?;
            fs::rename(&tmp, self.path(key))
        })();
        result.map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.err("writing an entry", e)
        })
    }

    /// An exclusive lock on `key` across the processes sharing this directory (`flock` on a lock
    /// file), held until the guard drops: a PE that takes it after another built the entry finds
    /// it in the cache instead of compiling it again. Dropping the guard removes the lock file;
    /// a process that waited on the removed file and one that creates a new one may then both
    /// build, which only costs time (entries are written atomically).
    pub fn lock(&self, key: &CacheKey) -> Result<EntryLock> {
        self.flock(key, true)
            .map(|l| l.expect("a blocking lock is always taken"))
    }

    /// [`DiskCache::lock`] without waiting: `None` while another holder has it.
    pub fn try_lock(&self, key: &CacheKey) -> Result<Option<EntryLock>> {
        self.flock(key, false)
    }

    /// Whether `key`'s lock file is there: a process is building the entry (a lock's file goes
    /// when it is released). A hint for what to do first, never for correctness: a process that
    /// was killed holding it leaves its file behind. Unlike [`DiskCache::try_lock`], it takes
    /// nothing, so a helper going over its jobs at that moment never finds the entry taken.
    pub fn held(&self, key: &CacheKey) -> bool {
        self.lock_path(key).exists()
    }

    fn lock_path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(format!(".{}.lock", key.file_name()))
    }

    fn flock(&self, key: &CacheKey, wait: bool) -> Result<Option<EntryLock>> {
        use std::os::fd::AsRawFd;
        let path = self.lock_path(key);
        let open = || {
            fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
        };
        let file = open()
            .or_else(|e| match e.kind() {
                // The directory was removed while in use: recreate it.
                io::ErrorKind::NotFound => fs::create_dir_all(&self.dir).and_then(|_| open()),
                _ => Err(e),
            })
            .map_err(|e| self.err("creating a lock file", e))?;
        let op = if wait {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        // SAFETY: flock on a file descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } != 0 {
            let e = io::Error::last_os_error();
            if !wait && e.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(self.err("locking an entry", e));
        }
        Ok(Some(EntryLock { path, _file: file }))
    }

    fn tmp_path(&self, stem: &str) -> PathBuf {
        let seq = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
        self.dir
            .join(format!(".{stem}.{}.{seq}.tmp", std::process::id()))
    }

    fn err(&self, action: &'static str, source: io::Error) -> Error {
        Error::Cache {
            dir: self.dir.clone(),
            action,
            source,
        }
    }
}

/// The one line printed when the disk cache fails: the error (which names the directory and the
/// fix) and what pgas does instead.
pub fn warning(e: &Error) -> String {
    format!("pgas: warning: {e}; compiling without it (kernels are kept in memory only)")
}

fn warn(e: &Error) {
    eprintln!("{}", warning(e));
}

/// The lock [`DiskCache::lock`] returns; unlocked (and its file removed) when dropped.
#[derive(Debug)]
pub struct EntryLock {
    path: PathBuf,
    _file: fs::File,
}

impl Drop for EntryLock {
    fn drop(&mut self) {
        // Removed while still held, so no process locks a file that is about to vanish; the
        // descriptor closes (and the flock ends) right after.
        let _ = fs::remove_file(&self.path);
    }
}

fn write_entry(w: &mut dyn Write, key: &CacheKey, payload: &[u8]) -> io::Result<()> {
    w.write_all(MAGIC)?;
    w.write_all(&key.0)?;
    w.write_all(&(payload.len() as u64).to_le_bytes())?;
    w.write_all(&Sha256::digest(payload))?;
    w.write_all(payload)
}

/// The payload of a well-formed entry for `key`, or `None`.
fn decode<'a>(key: &CacheKey, bytes: &'a [u8]) -> Option<&'a [u8]> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC || bytes[8..40] != key.0 {
        return None;
    }
    let len = u64::from_le_bytes(bytes[40..48].try_into().ok()?);
    let payload = &bytes[HEADER_LEN..];
    if payload.len() as u64 != len || Sha256::digest(payload)[..] != bytes[48..80] {
        return None;
    }
    Some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> CacheKey {
        CacheKey::new(
            "src",
            &format!("k{n}"),
            &["-arch=sm_90".into()],
            (13, 0),
            "3.4.5",
            (9, 0),
        )
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pgas-disk-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_lock_keeps_other_holders_waiting_until_it_drops() {
        let dir = tmpdir("lock");
        let cache = DiskCache::open(&dir).unwrap();
        let first = cache.lock(&key(1)).unwrap();
        assert!(
            cache.try_lock(&key(1)).unwrap().is_none(),
            "held: try_lock gives up"
        );
        assert!(cache.held(&key(1)), "held() sees the lock");
        let other_key = cache.try_lock(&key(2)).unwrap();
        assert!(other_key.is_some(), "another entry's lock is free");
        drop(other_key);
        assert!(!cache.held(&key(2)), "a released lock is not held");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _second = cache.lock(&key(1)).unwrap();
                tx.send(()).unwrap();
            });
            let waited = rx.recv_timeout(std::time::Duration::from_millis(300));
            assert!(
                waited.is_err(),
                "the second holder got the lock while the first held it"
            );
            drop(first);
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("the second holder gets the lock once the first drops");
        });
        let left: Vec<_> = fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).collect();
        assert!(left.is_empty(), "lock files are removed: {left:?}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn key_depends_on_every_input() {
        let base = key(0);
        assert_ne!(
            base,
            CacheKey::new(
                "src",
                "k0",
                &["-arch=sm_90".into()],
                (13, 1),
                "3.4.5",
                (9, 0)
            )
        );
        assert_ne!(
            base,
            CacheKey::new(
                "src",
                "k0",
                &["-arch=sm_90".into()],
                (13, 0),
                "3.4.6",
                (9, 0)
            )
        );
        assert_ne!(
            base,
            CacheKey::new(
                "src",
                "k0",
                &["-arch=sm_90".into()],
                (13, 0),
                "3.4.5",
                (10, 0)
            )
        );
        assert_ne!(
            base,
            CacheKey::new("src", "k0", &[], (13, 0), "3.4.5", (9, 0))
        );
        assert_ne!(
            base,
            CacheKey::new(
                "src2",
                "k0",
                &["-arch=sm_90".into()],
                (13, 0),
                "3.4.5",
                (9, 0)
            )
        );
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tmpdir("rt");
        let c = DiskCache::open(&dir).unwrap();
        let k = key(1);
        assert_eq!(c.load(&k).unwrap(), Lookup::Miss);
        c.store(&k, b"cubin bytes").unwrap();
        assert_eq!(c.load(&k).unwrap(), Lookup::Hit(b"cubin bytes".to_vec()));

        // Flip one payload byte: detected, dropped, then a miss until rebuilt.
        let mut bytes = fs::read(c.path(&k)).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(c.path(&k), &bytes).unwrap();
        assert_eq!(c.load(&k).unwrap(), Lookup::Corrupt);
        assert!(!c.path(&k).exists());
        assert_eq!(c.load(&k).unwrap(), Lookup::Miss);

        // Truncated (torn) and foreign files too.
        c.store(&k, b"cubin bytes").unwrap();
        let bytes = fs::read(c.path(&k)).unwrap();
        fs::write(c.path(&k), &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(c.load(&k).unwrap(), Lookup::Corrupt);
        fs::write(c.path(&k), b"hello").unwrap();
        assert_eq!(c.load(&k).unwrap(), Lookup::Corrupt);
        // An entry stored under another key's name is not served.
        c.store(&key(2), b"other").unwrap();
        fs::copy(c.path(&key(2)), c.path(&k)).unwrap();
        assert_eq!(c.load(&k).unwrap(), Lookup::Corrupt);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_writers_never_expose_a_torn_entry() {
        let dir = tmpdir("conc");
        let c = DiskCache::open(&dir).unwrap();
        let k = key(3);
        let payload: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10 {
                        c.store(&k, &payload).unwrap();
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..200 {
                    match c.load(&k).unwrap() {
                        Lookup::Hit(p) => assert!(p == payload),
                        Lookup::Miss => {}
                        Lookup::Corrupt => panic!("a reader saw a torn entry"),
                    }
                }
            });
        });
        assert_eq!(c.load(&k).unwrap(), Lookup::Hit(payload));
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unwritable_dir_is_an_error_naming_it() {
        // Tests run as root, where permission bits do not stop writes: a directory below a
        // regular file cannot be created by anyone.
        let file = tmpdir("notadir");
        fs::write(&file, b"").unwrap();
        let dir = file.join("cache");
        let err = DiskCache::open(&dir).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&dir.display().to_string()), "{msg}");
        assert!(
            msg.contains("PGAS_CACHE_DIR") && msg.contains("PGAS_CACHE=off"),
            "{msg}"
        );
        fs::remove_file(file).unwrap();
    }

    #[test]
    fn a_cache_that_fails_underneath_degrades_to_misses_and_warns_once() {
        // Root ignores permission bits, so the failure is injected by putting a regular file
        // where the directory was: every read, lock and write below it then fails (ENOTDIR),
        // as on a directory made read-only or a disk that went away.
        let dir = tmpdir("broken");
        let c = DiskCache::open(&dir).unwrap();
        c.store(&key(6), b"before").unwrap();
        fs::remove_dir_all(&dir).unwrap();
        fs::write(&dir, b"not a directory").unwrap();
        assert!(!c.warned());
        assert_eq!(c.load_or_miss(&key(6)), Lookup::Miss);
        assert!(c.warned(), "the first failure is reported");
        c.store_or_warn(&key(6), b"after");
        assert!(matches!(c.lock_or_warn(&key(6), true), Some(None)));
        assert!(matches!(c.lock_or_warn(&key(6), false), Some(None)));
        assert_eq!(fs::read(&dir).unwrap(), b"not a directory");
        // Opening such a cache gives none, with one line naming the directory and the fix.
        assert!(DiskCache::open_or_warn(dir.join("kernels")).is_none());
        let e = DiskCache::open(dir.join("kernels")).unwrap_err();
        let line = warning(&e);
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(
            line.contains(&dir.display().to_string())
                && line.contains("PGAS_CACHE_DIR")
                && line.contains("kept in memory"),
            "{line}"
        );
        fs::remove_file(dir).unwrap();
    }

    #[test]
    fn a_removed_directory_is_recreated() {
        let dir = tmpdir("removed");
        let c = DiskCache::open(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        c.store(&key(5), b"x").unwrap();
        assert_eq!(c.load(&key(5)).unwrap(), Lookup::Hit(b"x".to_vec()));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn full_disk_is_an_error_and_leaves_nothing_behind() {
        let dir = tmpdir("full");
        let c = DiskCache::open(&dir).unwrap();
        // What write(2) returns on a full file system.
        let enospc = || io::Error::from_raw_os_error(28);
        let err = c.store_with(&key(4), |_| Err(enospc())).unwrap_err();
        assert!(matches!(&err, Error::Cache { source, .. } if source.raw_os_error() == Some(28)));
        assert!(err.to_string().contains(&dir.display().to_string()));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        assert_eq!(c.load(&key(4)).unwrap(), Lookup::Miss);
        fs::remove_dir_all(dir).unwrap();
    }
}
