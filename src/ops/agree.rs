//! The cross-PE argument check of collective operations: every PE's arguments gathered and
//! compared, so a mismatch is the same `Err` on every PE before anything launches.

use crate::{Error, Pgas, Result, Team};

/// Checks that every PE passed the same arguments to a collective operation: each PE's
/// `fields` (name, value) are gathered on every PE (a symmetric `fcollect` on the pgas stream,
/// then a host wait) and compared, so a mismatch is the same `Err` on every PE and nothing that
/// would leave a PE waiting has launched. `what` names the operation in the message. Collective
/// over all PEs; free with one PE.
///
/// # Errors
/// [`Error::InvalidConfig`] naming each field that differs with every PE's value; a different
/// number of fields on some PE is [`Error::AllocMismatch`] (on every PE).
pub fn agree(pgas: &Pgas, what: &'static str, fields: &[(&str, u64)]) -> Result<()> {
    let n = pgas.n_pes();
    if n < 2 || fields.is_empty() {
        return Ok(());
    }
    let values: Vec<u64> = fields.iter().map(|f| f.1).collect();
    let all = gather_words(pgas, &values)?;
    disagreement(what, fields, &all, n)
}

/// Every PE's `words` (the same count on each), in PE order, on every PE: a symmetric
/// `fcollect` on the pgas stream, then a host wait. Collective over all PEs.
pub(crate) fn gather_words(pgas: &Pgas, words: &[u64]) -> Result<Vec<u64>> {
    let mine = pgas.alloc_from(words)?;
    let all = pgas.alloc::<u64>(words.len() * pgas.n_pes())?;
    pgas.fcollect(Team::WORLD, &all, &mine)?;
    all.to_vec()
}

/// The error of [`agree`] when the gathered values (`n` PEs' rows of `fields.len()`) differ.
fn disagreement(what: &'static str, fields: &[(&str, u64)], all: &[u64], n: usize) -> Result<()> {
    let len = fields.len();
    let differ: Vec<String> = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| (1..n).any(|pe| all[pe * len + i] != all[*i]))
        .map(|(i, (name, _))| {
            let per_pe: Vec<String> = (0..n)
                .map(|pe| format!("PE {pe} {}", all[pe * len + i]))
                .collect();
            format!("{name}: {}", per_pe.join(", "))
        })
        .collect();
    if differ.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: what,
        value: differ.join("; "),
        reason: "the PEs passed different arguments to this collective operation (nothing was \
                 launched on any PE). Fix: call it with the same shapes and types on every PE"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disagreement_names_the_field_and_every_pe() {
        let fields = [("m", 8u64), ("n", 4)];
        assert!(disagreement("op", &fields, &[8, 4, 8, 4], 2).is_ok());
        let e = disagreement("op", &fields, &[8, 4, 8, 5, 8, 4], 3)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("n: PE 0 4, PE 1 5, PE 2 4") && !e.contains("m: ") && e.contains("Fix:"),
            "{e}"
        );
    }
}
