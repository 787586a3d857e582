//! `pgas::gemm` beyond whole tiles: M of any size (the copy engine reads zeros past M and
//! stores nothing there), split-K (each tile's K steps in parts whose f32 sums meet in a
//! workspace), and the grouped GEMM (`gemm_grouped`, bf16 and FP8: the groups' rows contiguous,
//! each group multiplied by its own matrix, padding tiles skipped), every element against an
//! f64 host product, plain and checked.

use crate::cluster::{config, gemm_sm90_or_refused, host_points, off_points, refused};
use crate::runner::{case, Case};
use crate::util::{ensure, CaseResult};
use pgas::gemm::reference::value;
use pgas::gemm::{
    gemm_bf16_with, gemm_grouped, gemm_grouped_with, GemmConfig, GroupedRows, Operand, STREAM_K,
};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("gemm/any_m_rows_1_64_200_328", any_m_case),
    case("gemm/grouped_5_groups_with_padding", grouped_case),
];

/// `config(tile)` with K split in `splits` parts.
fn split(tile: (u32, u32, u32), splits: u32) -> GemmConfig {
    GemmConfig {
        splits,
        ..config(tile)
    }
}

/// Every point of an `m x n` C.
fn all_points(m: usize, n: usize) -> Vec<(usize, usize)> {
    (0..m).flat_map(|r| (0..n).map(move |c| (r, c))).collect()
}

/// M of 1, 64, 200 and 328 rows (a partial tile, alone or after whole ones; with clusters of 2
/// where M has an even number of tiles, one block's tile then wholly past M), each tile width,
/// K whole, split in 2, 4 and 8 parts and by stream-K (over the persistent grid, and over a
/// grid of 5 clusters, whose runs of K steps start mid-tile and cross tiles); a split that does
/// not divide K's steps is refused.
fn any_m_case(p: &Pgas) -> CaseResult {
    if !gemm_sm90_or_refused(p)? {
        return Ok(());
    }
    let s = p.stream();
    let (n, k) = (256, 512);
    let mut failed = Vec::new();
    for m in [1, 64, 200, 328] {
        let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 3)).collect();
        let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 4)).collect();
        let (a, bt) = (s.clone_htod(&a_host)?, s.clone_htod(&b_host)?);
        let points = all_points(m, n);
        let want = host_points(&a_host, &b_host, k, &points);
        let picked = GemmConfig::for_shape(m, n, k, p.sm_count()?);
        let clustered = m.div_ceil(128) % 2 == 0;
        let mut configs = vec![
            picked,
            config((64, 1, 3)),
            config((256, 1, 4)),
            split((256, 1, 4), 4),
            split((128, 1, 6), 8),
            split((256, 1, 4), STREAM_K),
            split((64, 1, 3), STREAM_K),
            GemmConfig {
                clusters: Some(5),
                ..split((64, 1, 3), STREAM_K)
            },
        ];
        if clustered {
            configs.push(config((128, 2, 6)));
            configs.push(split((128, 2, 6), 2));
            configs.push(split((128, 2, 6), STREAM_K));
        }
        for cfg in configs {
            for checked in [false, true] {
                let mut c = s.alloc_zeros::<bf16>(m * n)?;
                gemm_bf16_with(p, &mut c, &a, &bt, (m, n, k), cfg, checked)?;
                let got = s.clone_dtoh(&c)?;
                if let (bad, Some((r, col, g, w))) = off_points(&got, n, &points, &want) {
                    failed.push(format!(
                        "M = {m} {cfg:?} checked={checked}: {bad} points off; C[{r}][{col}] = {g}, host {w:.4}"
                    ));
                }
            }
        }
    }
    ensure(failed.is_empty(), || failed.join("\n  "))?;
    let (a, bt) = (
        s.alloc_zeros::<bf16>(64 * k)?,
        s.alloc_zeros::<bf16>(n * k)?,
    );
    let mut c = s.alloc_zeros::<bf16>(64 * n)?;
    refused(
        "split-K in 3 parts of 8 K steps",
        gemm_bf16_with(p, &mut c, &a, &bt, (64, n, k), split((256, 1, 4), 3), false),
        &["split-K in 3 parts: a divisor of K's 8 steps"],
    )
}

/// Five groups of 130, 0, 128, 1 and 300 rows, each with its own Bt, then a table with a
/// padding tile (-1: its rows of C keep what they held) and a group past the last (zeros); in
/// bf16, then in FP8 (the same values rounded to e4m3).
fn grouped_case(p: &Pgas) -> CaseResult {
    if !gemm_sm90_or_refused(p)? {
        return Ok(());
    }
    let s = p.stream();
    let (n, k) = (256, 256);
    let counts = [130, 0, 128, 1, 300];
    let groups = counts.len();
    let layout = GroupedRows::new(&counts);
    let m = layout.m;
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 5)).collect();
    let b_host: Vec<bf16> = (0..groups * n * k).map(|i| value(i, 6)).collect();
    let mut failed = grouped_runs(p, &layout, (&a_host, &b_host), (n, k), |x| x.to_f64())?;
    let q = |v: &bf16| e4m3::from_f32(v.to_f32());
    let (a8, b8): (Vec<e4m3>, Vec<e4m3>) = (
        a_host.iter().map(q).collect(),
        b_host.iter().map(q).collect(),
    );
    failed.extend(grouped_runs(p, &layout, (&a8, &b8), (n, k), |x| {
        x.to_f64()
    })?);
    let (a, bt) = (s.clone_htod(&a_host)?, s.clone_htod(&b_host)?);
    ensure(failed.is_empty(), || failed.join("\n  "))?;
    let table = s.clone_htod(&layout.group_of[..2])?;
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    refused(
        "a grouped GEMM whose table misses tiles",
        gemm_grouped(p, &mut c, &a, &bt, &table, (m, n, k), groups, false),
        &["a group for each of its 7 row tiles (2 given)"],
    )?;
    let table = s.clone_htod(&layout.group_of)?;
    refused(
        "a grouped GEMM in clusters of 2",
        gemm_grouped_with(
            p,
            s,
            &mut c,
            &a,
            &bt,
            &table,
            (m, n, k),
            groups,
            config((64, 2, 3)),
            false,
        ),
        &["in clusters of 2", "clusters of 1"],
    )?;
    refused(
        "a grouped GEMM whose Bt has fewer groups",
        gemm_grouped(p, &mut c, &a, &bt, &table, (m, n, k), groups + 1, false),
        &["buffer sizes"],
    )?;
    let (a8, b8) = (
        s.alloc_zeros::<e4m3>(m * 192)?,
        s.alloc_zeros::<e4m3>(groups * n * 192)?,
    );
    refused(
        "an FP8 grouped GEMM of K = 192",
        gemm_grouped(p, &mut c, &a8, &b8, &table, (m, n, 192), groups, false),
        &["K = 192 is not a positive multiple of 128"],
    )
}

/// [`grouped_case`]'s launches in `T`: the layout's table and one with a padding tile and a
/// group past the last, each with the picked specialization and two others, plain and checked,
/// every element of C against the host (`f` reads an element). Returns what was off.
fn grouped_runs<T: Operand + Copy>(
    p: &Pgas, layout: &GroupedRows, (a_host, b_host): (&[T], &[T]), (n, k): (usize, usize),
    f: impl Fn(&T) -> f64,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let s = p.stream();
    let m = layout.m;
    let groups = layout.starts.len();
    let (a, bt) = (s.clone_htod(a_host)?, s.clone_htod(b_host)?);
    // Tile 1 (rows 128..256, group 0's last 2 rows and padding) made padding, and the last
    // tile given group 7 of 5.
    let mut table = layout.group_of.clone();
    table[1] = -1;
    let last = table.len() - 1;
    table[last] = 7;
    let tables = [layout.group_of.clone(), table];
    let sentinel = bf16::from_f32(-3.0);
    let points = all_points(m, n);
    let mut failed = Vec::new();
    for (t, group_of) in tables.iter().enumerate() {
        let want: Vec<f64> = points
            .iter()
            .map(|&(row, col)| match group_of[row / 128] {
                g if g < 0 => sentinel.to_f64(),
                g if g as usize >= groups => 0.0,
                g => {
                    let b = &b_host[(g as usize * n + col) * k..];
                    (0..k).map(|x| f(&a_host[row * k + x]) * f(&b[x])).sum()
                }
            })
            .collect();
        let table = s.clone_htod(group_of)?;
        let picked = GemmConfig::for_grouped(m, n, p.sm_count()?);
        for cfg in [picked, config((128, 1, 6)), config((256, 1, 4))] {
            for checked in [false, true] {
                let mut c = s.clone_htod(&vec![sentinel; m * n])?;
                gemm_grouped_with(
                    p,
                    s,
                    &mut c,
                    &a,
                    &bt,
                    &table,
                    (m, n, k),
                    groups,
                    cfg,
                    checked,
                )?;
                let got = s.clone_dtoh(&c)?;
                if let (bad, Some((r, col, g, w))) = off_points(&got, n, &points, &want) {
                    failed.push(format!(
                        "{} table {t} {cfg:?} checked={checked}: {bad} elements off; C[{r}][{col}] = {g}, want {w:.4}",
                        std::any::type_name::<T>()
                    ));
                }
            }
        }
    }
    Ok(failed)
}
