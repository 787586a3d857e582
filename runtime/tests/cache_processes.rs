//! Several processes sharing one kernel cache directory at once, as the PEs of a node do: each
//! stores and loads the same entries and entries of its own, and none may ever read a torn one
//! (a load is a whole, verified entry or a miss). A process killed in the middle of a store
//! leaves no entry behind, only a temporary file that no lookup reads.
//!
//! The processes are this test binary again, started with `CHILD_VAR` set.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgas_runtime::jit::disk::{CacheKey, DiskCache, Lookup};

/// `DIR,ID` for a child process; unset in the parent.
const CHILD_VAR: &str = "PGAS_TEST_CACHE_CHILD";
const PROCESSES: usize = 6;
/// Entries every process writes.
const SHARED: usize = 4;

fn key(name: &str) -> CacheKey {
    CacheKey::new("src", name, &[], (13, 0), "3.4.5", (9, 0))
}

/// The payload of an entry: large enough that a write takes many system calls, and a function of
/// the name only, so every writer of one entry writes the same bytes.
fn payload(name: &str) -> Vec<u8> {
    let seed = name
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    let len = (512 << 10) + (seed as usize % 4096);
    (0..len)
        .map(|i| (seed.wrapping_add(i as u32).wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pgas-procs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Starts this binary running only `test`, as child `id` on `dir`.
fn child(test: &str, dir: &Path, id: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, format!("{},{id}", dir.display()))
        .stdout(Stdio::null());
    cmd
}

fn child_args() -> Option<(PathBuf, usize)> {
    let v = std::env::var(CHILD_VAR).ok()?;
    let (dir, id) = v.rsplit_once(',')?;
    Some((PathBuf::from(dir), id.parse().ok()?))
}

/// The child's side of `processes_sharing_a_cache_never_read_a_torn_entry` (returns at once in
/// a normal run).
#[test]
fn child_stores_and_loads_for_a_while() {
    let Some((dir, id)) = child_args() else {
        return;
    };
    let cache = DiskCache::open(&dir).unwrap();
    let mut names: Vec<String> = (0..SHARED).map(|k| format!("shared{k}")).collect();
    names.push(format!("own{id}"));
    let end = Instant::now() + Duration::from_millis(1500);
    let mut round = 0usize;
    while Instant::now() < end {
        for (i, name) in names.iter().enumerate() {
            let k = key(name);
            // Interleave stores and loads differently in each process.
            if (round + i + id).is_multiple_of(2) {
                cache.store(&k, &payload(name)).unwrap();
            }
            match cache.load(&k).unwrap() {
                Lookup::Hit(p) => assert!(p == payload(name), "{name}: wrong bytes served"),
                Lookup::Miss => {}
                Lookup::Corrupt => panic!("process {id} read a torn entry {name}"),
            }
        }
        round += 1;
    }
}

#[test]
fn processes_sharing_a_cache_never_read_a_torn_entry() {
    if child_args().is_some() {
        return;
    }
    let dir = tmpdir("shared");
    DiskCache::open(&dir).unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|id| {
            child("child_stores_and_loads_for_a_while", &dir, id)
                .spawn()
                .unwrap()
        })
        .collect();
    for (id, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "process {id}: {}", out.status);
    }
    let cache = DiskCache::open(&dir).unwrap();
    let mut names: Vec<String> = (0..SHARED).map(|k| format!("shared{k}")).collect();
    names.extend((0..PROCESSES).map(|id| format!("own{id}")));
    for name in &names {
        assert_eq!(
            cache.load(&key(name)).unwrap(),
            Lookup::Hit(payload(name)),
            "{name}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "temporary or lock files left: {left:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The child's side of `a_writer_killed_mid_store_leaves_no_entry` (returns at once in a normal
/// run): stores one entry over and over until killed.
#[test]
fn child_stores_until_killed() {
    let Some((dir, _)) = child_args() else {
        return;
    };
    let cache = DiskCache::open(&dir).unwrap();
    let big: Vec<u8> = (0..64 << 20).map(|i| (i % 253) as u8).collect();
    loop {
        cache.store(&key("big"), &big).unwrap();
    }
}

#[test]
fn a_writer_killed_mid_store_leaves_no_torn_entry() {
    if child_args().is_some() {
        return;
    }
    let dir = tmpdir("killed");
    let cache = DiskCache::open(&dir).unwrap();
    let mut c = child("child_stores_until_killed", &dir, 0).spawn().unwrap();
    // Kill it once its first temporary file is being written.
    let t = Instant::now();
    let mut writing = false;
    while !writing && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
        writing = std::fs::read_dir(&dir)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp"));
    }
    c.kill().unwrap();
    assert!(writing, "the writer never started a store");
    c.wait().unwrap();
    match cache.load(&key("big")).unwrap() {
        Lookup::Hit(p) => assert_eq!(p.len(), 64 << 20),
        Lookup::Miss => {}
        Lookup::Corrupt => panic!("a killed writer left a torn entry"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}
