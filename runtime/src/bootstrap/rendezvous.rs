//! The loopback rendezvous of `pgas-run`: rank 0 posts NVSHMEM's 128-byte unique id, the other
//! ranks fetch it.
//!
//! Protocol (one request per TCP connection, on 127.0.0.1): the client sends
//! `PGAS1 PUT <token>\n` followed by 128 bytes, or `PGAS1 GET <token>\n`. The server answers
//! `OK\n`, `ID\n` followed by 128 bytes, `WAIT\n` (no id yet: ask again) or `ERR <why>\n`.
//! Every socket has timeouts and a fetch gives up at its deadline, so nothing waits forever.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Length of an NVSHMEM unique id.
pub const ID_LEN: usize = 128;

const MAGIC: &str = "PGAS1";
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_EVERY: Duration = Duration::from_millis(20);
const METHOD: &str = "the pgas-run rendezvous";

/// The rendezvous server `pgas-run` runs for its ranks. Stops when dropped.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on an ephemeral port of 127.0.0.1, accepting requests that carry `token`.
    pub fn start(token: String) -> Result<Server> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(Error::io("rendezvous: bind 127.0.0.1"))?;
        let addr = listener
            .local_addr()
            .map_err(Error::io("rendezvous: local address"))?;
        // Non-blocking accept so the thread notices `stop` promptly.
        listener
            .set_nonblocking(true)
            .map_err(Error::io("rendezvous: set non-blocking"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || serve(listener, &token, &flag));
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address to hand to the ranks (`PGAS_RENDEZVOUS`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: TcpListener, token: &str, stop: &AtomicBool) {
    let mut id: Option<[u8; ID_LEN]> = None;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            // A broken client only loses its own request.
            Ok((stream, _)) => {
                let _ = handle(stream, token, &mut id);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn handle(stream: TcpStream, token: &str, id: &mut Option<[u8; ID_LEN]>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.by_ref().take(256).read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let (magic, verb, tok) = (words.next(), words.next(), words.next());
    let mut out = stream;
    if magic != Some(MAGIC) || tok != Some(token) {
        return out.write_all(b"ERR wrong protocol or job token\n");
    }
    match verb {
        Some("PUT") if id.is_some() => out.write_all(b"ERR the unique id was already posted\n"),
        Some("PUT") => {
            let mut buf = [0u8; ID_LEN];
            reader.read_exact(&mut buf)?;
            *id = Some(buf);
            out.write_all(b"OK\n")
        }
        Some("GET") => match id {
            Some(buf) => {
                out.write_all(b"ID\n")?;
                out.write_all(buf)
            }
            None => out.write_all(b"WAIT\n"),
        },
        _ => out.write_all(b"ERR unknown request\n"),
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

fn fail(reason: String) -> Error {
    Error::Bootstrap {
        method: METHOD,
        reason,
    }
}

/// Posts the unique id (rank 0).
pub fn publish(addr: SocketAddr, token: &str, id: &[u8; ID_LEN]) -> Result<()> {
    let io = |e: std::io::Error| {
        fail(format!(
            "posting the unique id to {addr}: {e} (did pgas-run exit?)"
        ))
    };
    let mut s = connect(addr).map_err(io)?;
    s.write_all(format!("{MAGIC} PUT {token}\n").as_bytes())
        .map_err(io)?;
    s.write_all(id).map_err(io)?;
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).map_err(io)?;
    match reply.trim_end() {
        "OK" => Ok(()),
        other => Err(fail(format!(
            "the rendezvous at {addr} refused the unique id: {other:?}"
        ))),
    }
}

/// Fetches the unique id posted by rank 0, asking again until `timeout` has passed.
pub fn fetch(addr: SocketAddr, token: &str, timeout: Duration) -> Result<[u8; ID_LEN]> {
    let deadline = Instant::now() + timeout;
    loop {
        match try_fetch(addr, token) {
            Ok(Some(id)) => return Ok(id),
            Ok(None) => {}
            Err(Fetch::Refused(why)) => {
                return Err(fail(format!("the rendezvous at {addr} answered {why:?}")))
            }
            Err(Fetch::Io(e)) if Instant::now() >= deadline => {
                return Err(fail(format!(
                    "cannot reach the rendezvous at {addr}: {e} (did pgas-run exit?)"
                )))
            }
            Err(Fetch::Io(_)) => {}
        }
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "rank 0 did not post the unique id within {} s; is rank 0 alive and calling pgas::init()? \
                 ({} raises the limit)",
                timeout.as_secs(),
                super::env::RENDEZVOUS_TIMEOUT
            )));
        }
        std::thread::sleep(RETRY_EVERY);
    }
}

enum Fetch {
    Io(std::io::Error),
    Refused(String),
}

fn try_fetch(addr: SocketAddr, token: &str) -> std::result::Result<Option<[u8; ID_LEN]>, Fetch> {
    let mut s = connect(addr).map_err(Fetch::Io)?;
    s.write_all(format!("{MAGIC} GET {token}\n").as_bytes())
        .map_err(Fetch::Io)?;
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply).map_err(Fetch::Io)?;
    match reply.trim_end() {
        "WAIT" => Ok(None),
        "ID" => {
            let mut id = [0u8; ID_LEN];
            r.read_exact(&mut id).map_err(Fetch::Io)?;
            Ok(Some(id))
        }
        other => Err(Fetch::Refused(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_get_what_rank_0_posted() {
        let server = Server::start("tok".into()).unwrap();
        let addr = server.addr();
        let waiter = std::thread::spawn(move || fetch(addr, "tok", Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        let id = [7u8; ID_LEN];
        publish(addr, "tok", &id).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), id);
        assert_eq!(fetch(addr, "tok", Duration::from_secs(1)).unwrap(), id);
        let again = publish(addr, "tok", &id).unwrap_err().to_string();
        assert!(again.contains("already posted"), "{again}");
    }

    #[test]
    fn wrong_token_is_refused_at_once() {
        let server = Server::start("right".into()).unwrap();
        let t = Instant::now();
        let e = fetch(server.addr(), "wrong", Duration::from_secs(30))
            .unwrap_err()
            .to_string();
        assert!(e.contains("job token"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn fetch_gives_up_at_its_deadline() {
        let server = Server::start("t".into()).unwrap();
        let t = Instant::now();
        let e = fetch(server.addr(), "t", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rank 0 did not post"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn a_dead_server_is_an_error_not_a_hang() {
        let addr = Server::start("t".into()).unwrap().addr(); // dropped: stopped
        let t = Instant::now();
        let e = fetch(addr, "t", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rendezvous"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}
