//! The rank side of `pgas-run`: who am I, and the unique-id exchange through its rendezvous.

use std::net::SocketAddr;
use std::time::Duration;

use super::{env, rendezvous, uid};
use crate::error::{Error, Result};
use crate::ffi;

const METHOD: &str = "pgas-run";

/// This process as one rank of a `pgas-run` job.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    addr: SocketAddr,
    token: String,
    timeout: Duration,
}

impl Peer {
    /// Reads `PGAS_RANK`, `PGAS_WORLD_SIZE`, `PGAS_RENDEZVOUS`, `PGAS_RUN_ID`.
    pub(crate) fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Result<Peer> {
        let missing = |var: &str| {
            Error::Bootstrap {
            method: METHOD,
            reason: format!("{var} is not set; start the program with `pgas-run -n N -- PROGRAM` or pick another bootstrap"),
        }
        };
        let rank = env::parse_usize(get, env::RANK)?.ok_or_else(|| missing(env::RANK))?;
        let size =
            env::parse_usize(get, env::WORLD_SIZE)?.ok_or_else(|| missing(env::WORLD_SIZE))?;
        if rank >= size {
            return Err(Error::Bootstrap {
                method: METHOD,
                reason: format!(
                    "{}={rank} is not below {}={size}. Fix: start the ranks with \
                     `pgas-run -n N`, which sets both",
                    env::RANK,
                    env::WORLD_SIZE
                ),
            });
        }
        let raw = get(env::RENDEZVOUS).ok_or_else(|| missing(env::RENDEZVOUS))?;
        let addr = raw.parse().map_err(|_| Error::InvalidConfig {
            name: env::RENDEZVOUS,
            value: raw.clone(),
            reason: "expected 127.0.0.1:PORT as set by pgas-run".to_string(),
        })?;
        let token = get(env::RUN_ID).ok_or_else(|| missing(env::RUN_ID))?;
        let timeout = Duration::from_secs(
            env::parse_usize(get, env::RENDEZVOUS_TIMEOUT)?.unwrap_or(120) as u64,
        );
        Ok(Peer {
            rank,
            size,
            addr,
            token,
            timeout,
        })
    }

    /// Rank 0 posts the id; the others fetch it.
    pub(crate) fn exchange(&self, id: &mut ffi::nvshmemx_uniqueid_t) -> Result<()> {
        if self.rank == 0 {
            rendezvous::publish(self.addr, &self.token, &uid::to_bytes(id))
        } else {
            *id = uid::from_bytes(&rendezvous::fetch(self.addr, &self.token, self.timeout)?);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_bad_variables_say_what_to_do() {
        let none = |_: &str| None;
        let e = Peer::from_env(&none).unwrap_err().to_string();
        assert!(e.contains("PGAS_RANK") && e.contains("pgas-run -n"), "{e}");
        let bad = |k: &str| match k {
            "PGAS_RANK" => Some("2".to_string()),
            "PGAS_WORLD_SIZE" => Some("2".to_string()),
            _ => None,
        };
        assert!(Peer::from_env(&bad)
            .unwrap_err()
            .to_string()
            .contains("not below"));
        let ok = |k: &str| match k {
            "PGAS_RANK" => Some("1".to_string()),
            "PGAS_WORLD_SIZE" => Some("2".to_string()),
            "PGAS_RENDEZVOUS" => Some("127.0.0.1:5000".to_string()),
            "PGAS_RUN_ID" => Some("abc".to_string()),
            _ => None,
        };
        let p = Peer::from_env(&ok).unwrap();
        assert_eq!(
            (p.rank, p.size, p.timeout),
            (1, 2, Duration::from_secs(120))
        );
    }

    #[test]
    fn ranks_exchange_the_id_through_the_server() {
        let server = rendezvous::Server::start("job".into()).unwrap();
        let addr = server.addr().to_string();
        let peer = |rank: usize| {
            let addr = addr.clone();
            Peer::from_env(&move |k: &str| match k {
                "PGAS_RANK" => Some(rank.to_string()),
                "PGAS_WORLD_SIZE" => Some("2".to_string()),
                "PGAS_RENDEZVOUS" => Some(addr.clone()),
                "PGAS_RUN_ID" => Some("job".to_string()),
                _ => None,
            })
            .unwrap()
        };
        let mut id0 = ffi::empty_uniqueid();
        id0.internal[3] = 9;
        peer(0).exchange(&mut id0).unwrap();
        let mut id1 = ffi::empty_uniqueid();
        peer(1).exchange(&mut id1).unwrap();
        assert_eq!(id1.internal[3], 9);
    }
}
