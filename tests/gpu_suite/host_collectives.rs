//! The host's on-stream NVSHMEM collectives (`Pgas::broadcast`, `fcollect`, `alltoall`,
//! `reduce`), over `Team::WORLD` and over a team split off it, against expectations computed here
//! (each PE's inputs are a function of its number, so every PE can compute all of them). No
//! kernel: these are host calls that NVSHMEM runs on the pgas stream.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("host_collectives/broadcast_f32", broadcast),
    case("host_collectives/fcollect_i32", fcollect),
    case("host_collectives/alltoall_u64", alltoall),
    case("host_collectives/reduce_world", reduce_world),
    case("host_collectives/reduce_split_team", reduce_split),
];

/// Elements per PE.
const L: usize = 64;

fn broadcast(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let root = n - 1;
    let src = p.alloc_from(&vec![me as f32 + 0.5; L])?;
    let dst = p.alloc::<f32>(L)?;
    p.barrier_all()?;
    p.broadcast(Team::WORLD, &dst, &src, root)?;
    util::settle(p)?;
    check_eq(
        "broadcast from the last PE",
        &dst.to_vec()?,
        &vec![root as f32 + 0.5; L],
    )
}

fn fcollect(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p) as i32;
    let src = p.alloc_from(&(0..L as i32).map(|i| me * 1000 + i).collect::<Vec<_>>())?;
    let dst = p.alloc::<i32>(L * n)?;
    p.barrier_all()?;
    p.fcollect(Team::WORLD, &dst, &src)?;
    util::settle(p)?;
    let want: Vec<i32> = (0..n as i32)
        .flat_map(|pe| (0..L as i32).map(move |i| pe * 1000 + i))
        .collect();
    check_eq("fcollect", &dst.to_vec()?, &want)
}

fn alltoall(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p) as u64;
    // Block `j` of PE `me`'s source is meant for PE `j`.
    let src: Vec<u64> = (0..n as u64)
        .flat_map(|j| (0..L as u64).map(move |i| me * 1_000_000 + j * 1000 + i))
        .collect();
    let src = p.alloc_from(&src)?;
    let dst = p.alloc::<u64>(L * n)?;
    p.barrier_all()?;
    p.alltoall(Team::WORLD, &dst, &src)?;
    util::settle(p)?;
    // Block `i` of this PE's result came from PE `i`.
    let want: Vec<u64> = (0..n as u64)
        .flat_map(|from| (0..L as u64).map(move |i| from * 1_000_000 + me * 1000 + i))
        .collect();
    check_eq("alltoall", &dst.to_vec()?, &want)
}

fn reduce_world(p: &Pgas) -> CaseResult {
    let n = util::npes(p) as i64;
    let me = util::me(p) as i64;
    let src = p.alloc_from(&(0..L as i64).map(|i| me + i).collect::<Vec<_>>())?;
    for (op, want) in [
        (
            ReduceOp::Sum,
            Box::new(|i: i64| n * i + n * (n - 1) / 2) as Box<dyn Fn(i64) -> i64>,
        ),
        (ReduceOp::Max, Box::new(|i: i64| n - 1 + i)),
        (ReduceOp::Min, Box::new(|i: i64| i)),
        (
            ReduceOp::Or,
            Box::new(|i: i64| (0..n).fold(0, |acc, pe| acc | (pe + i))),
        ),
    ] {
        let dst = p.alloc::<i64>(L)?;
        p.barrier_all()?;
        p.reduce(Team::WORLD, op, &dst, &src)?;
        util::settle(p)?;
        let expected: Vec<i64> = (0..L as i64).map(&want).collect();
        check_eq(
            &format!("reduce {op:?} over WORLD"),
            &dst.to_vec()?,
            &expected,
        )?;
    }
    Ok(())
}

/// The even PEs as a team (PE 0 alone on one PE): a reduction over it, and nothing on the others.
fn reduce_split(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let evens = n.div_ceil(2);
    let team = Team::WORLD.split_strided(p, 0, 2, evens)?;
    let src = p.alloc_from(&vec![me as f32 + 1.0; L])?;
    let dst = p.alloc_from(&vec![-1.0f32; L])?;
    p.barrier_all()?;
    let result = match team {
        Some(t) => {
            let (t_pe, t_n) = (t.my_pe(p)?, t.n_pes(p)?);
            if t_pe != Some(me / 2) || t_n != evens {
                return Err(format!(
                    "PE {me} in the even team as {t_pe:?} of {t_n}, expected {} of {evens}",
                    me / 2
                )
                .into());
            }
            let r = p.reduce(t, ReduceOp::Sum, &dst, &src);
            p.stream().synchronize()?;
            t.destroy(p)?;
            r
        }
        None if me % 2 == 1 => Ok(()),
        None => return Err(format!("even PE {me} is not in the even team").into()),
    };
    result?;
    util::settle(p)?;
    let want = if me.is_multiple_of(2) {
        (0..n).step_by(2).map(|pe| pe as f32 + 1.0).sum()
    } else {
        -1.0
    };
    check_eq(
        "reduce Sum over the even PEs",
        &dst.to_vec()?,
        &vec![want; L],
    )
}
