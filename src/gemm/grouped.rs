//! The grouped GEMM: one launch multiplies the rows of many groups (a mixture of experts'
//! experts) each by its own matrix, in the contiguous layout of DeepGEMM's grouped kernels:
//! the groups' rows one after the other in A and C, each group's padded to whole 128-row tiles,
//! and a table on the GPU naming each tile's group.

use super::kernel::BM;
use super::plan::{
    c_tile, check, kernel_k, launch, with_operand_maps, Chunking, GemmConfig, Maps, Operand, Words,
};
use super::shape::{self, size_error};
use crate::prelude::*;
use cudarc::driver::CudaStream;

/// Where each group's rows go in the contiguous layout: group `g`'s `counts[g]` rows start at
/// `starts[g]`, a multiple of 128, and the rows after them up to the next start are padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupedRows {
    /// The first row of each group.
    pub starts: Vec<usize>,
    /// All the rows, padding included: M of the grouped GEMM.
    pub m: usize,
    /// The group of each 128-row tile, as [`gemm_grouped`] takes it on the GPU; -1 for a tile
    /// of padding only (none here: a group's padding is less than a tile).
    pub group_of: Vec<i32>,
}

impl GroupedRows {
    /// The layout of groups of `counts` rows (a group may have none).
    pub fn new(counts: &[usize]) -> GroupedRows {
        let mut starts = Vec::with_capacity(counts.len());
        let mut group_of = Vec::new();
        let mut m = 0;
        for (g, &rows) in counts.iter().enumerate() {
            starts.push(m);
            let tiles = rows.div_ceil(BM);
            group_of.extend(std::iter::repeat_n(g as i32, tiles));
            m += tiles * BM;
        }
        GroupedRows {
            starts,
            m,
            group_of,
        }
    }
}

/// `C = A Btᵀ` by groups: 128-row tile `i` of `A` (m x k) and `C` (m x n) belongs to group
/// `group_of[i]`, whose matrix is `Bt`'s rows `group_of[i] * n ..` (`Bt` is `groups` matrices of
/// n x k, one under the other). `A` and `Bt` row-major bf16, or FP8 [`crate::e4m3`] (unscaled,
/// K then a multiple of 128); `C` row-major bf16; f32 accumulate; one launch, with the
/// specialization [`GemmConfig::for_grouped`] picks. [`GroupedRows`] lays out groups of any
/// size. A tile of group -1 is padding, skipped (C's rows there are not written); a group past
/// the last multiplies by zeros. Refuses a shape that is not whole tiles of N and K, buffers of
/// the wrong size, and a table shorter than M's tiles, before anything launches. Needs sm_90a.
#[allow(clippy::too_many_arguments)]
pub fn gemm_grouped<T: Operand>(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<T>, bt: &CudaSlice<T>,
    group_of: &CudaSlice<i32>, (m, n, k): (usize, usize, usize), groups: usize, checked: bool,
) -> crate::Result<()> {
    let cfg = GemmConfig::for_grouped(m, n, pgas.sm_count()?);
    let stream = pgas.stream();
    gemm_grouped_with(
        pgas,
        stream,
        c,
        a,
        bt,
        group_of,
        (m, n, k),
        groups,
        cfg,
        checked,
    )
}

/// [`gemm_grouped`] on `stream` (one of this PE's context's) with the specialization given
/// (its cluster must be 1).
#[allow(clippy::too_many_arguments)]
pub fn gemm_grouped_with<T: Operand>(
    pgas: &Pgas, stream: &CudaStream, c: &mut CudaSlice<bf16>, a: &CudaSlice<T>, bt: &CudaSlice<T>,
    group_of: &CudaSlice<i32>, (m, n, k): (usize, usize, usize), groups: usize, cfg: GemmConfig,
    checked: bool,
) -> crate::Result<()> {
    let refuse = |why| shape::refuse("gemm_bf16_sm90", why);
    if groups == 0 || cfg.cluster != 1 {
        return refuse(format!(
            "a grouped GEMM of {groups} groups in clusters of {}: it takes at least 1 group and \
             clusters of 1 (neighbouring row tiles may be different groups')",
            cfg.cluster
        ));
    }
    if let Some(why) = size_error((a.len(), bt.len(), c.len()), (m, n, k), (groups * n, k)) {
        return refuse(why);
    }
    let kk = kernel_k(T::FP8, k)?;
    check(cfg, (m, n, kk))?;
    let rows_b = groups * n;
    with_operand_maps(stream, (a, bt), (m, rows_b, kk), cfg, |a_map, b_map| {
        let mut c_map = TensorMap::tiled_2d_ragged_mut(stream, c, c_tile(m, n))?;
        let maps = Maps {
            c: &mut c_map,
            a: a_map,
            b: b_map,
            gathered: a_map,
            w: None,
        };
        let words = Words {
            landed: None,
            group_of: Some(group_of),
        };
        let rows = (Chunking::Grouped, (0, 0, 1));
        launch(
            pgas,
            stream,
            maps,
            words,
            (m, n, kk),
            rows,
            cfg,
            T::FP8,
            checked,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::GroupedRows;

    #[test]
    fn groups_start_on_whole_tiles_and_the_table_names_each_tile() {
        let g = GroupedRows::new(&[130, 0, 128, 1]);
        assert_eq!(g.starts, vec![0, 256, 256, 384]);
        assert_eq!(g.m, 512);
        assert_eq!(g.group_of, vec![0, 0, 2, 3]);
        assert_eq!(GroupedRows::new(&[]).m, 0);
    }
}
