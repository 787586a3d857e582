//! pgas's own library on memory pgas did not allocate: `pgas::gemm`, `pgas::coll` and
//! `pgas::ops` on tensors of PyTorch's allocator, by address. `pgas/_torch_ops.py` checks the torch
//! tensors (device, dtype, shape, contiguity), calls these with their `data_ptr()`s on torch's
//! current stream, and registers each as a torch custom op.
//!
//! The GEMM reads and writes the tensors themselves. The collectives and the all-reduce +
//! RMSNorm need symmetric memory (peers read and write it), so they stage: the input is copied
//! into a symmetric buffer of the call's stream, the operation runs there, and the result is
//! copied out. The staging buffers and the fused ops' plans live in the state's plans (made at
//! first use, collectively, and grown when a call needs more) until `finalize`.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::sys::{cuMemcpyDtoDAsync_v2, CUdeviceptr};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use pgas::coll::{Algorithm, AllToAllLayout, Comm as RtComm};
use pgas::e4m3;
use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
use pgas::ops::moe::{LowLatencyMoe, MoeConfig};
use pgas::ops::{AllGatherMatmul, AllReduceRmsNorm};
use pgas_runtime::{Pgas, SymTensor, Team};
use pyo3::prelude::*;

use crate::dtype::{self, with_pair, AnyTensor};
use crate::errors::{misuse, to_py};
use crate::ops::call::{with_stream, Region};
use crate::ops::collectives::reduce_op_of;
use crate::state::{finish_gpu, State};
use crate::stream;
use crate::torch_tensor::{_untraced, current_stream, matrix, untraced, Elem};

/// `len` elements at a foreign address as the cudarc buffer the runtime's fused ops take. It
/// never frees the memory: dropping it releases the buffer's handle only (`leak`).
///
/// It carries no cudarc events. The caller's stream orders the memory (torch's allocator reuses
/// it in stream order), and a launch captured into a CUDA graph must not wait on an event
/// recorded outside the capture, which an event-tracked buffer would make it do on its second
/// use. It also saves two event creations a buffer a call.
struct Borrowed<T>(ManuallyDrop<CudaSlice<T>>);

impl<T> Borrowed<T> {
    /// Each (address, length) of `buffers`.
    ///
    /// # Safety
    /// Each address holds its length of elements on this PE's GPU for as long as its value
    /// lives.
    unsafe fn each<const N: usize>(
        stream: &Arc<CudaStream>, buffers: [(u64, usize); N],
    ) -> [Borrowed<T>; N] {
        let ctx = stream.context();
        let tracking = ctx.is_event_tracking();
        // SAFETY: tracking is off only while these handles are made, and their memory is ordered
        // by the caller's stream (above), not by events. (A cudarc buffer another thread of this
        // process made in that window would carry no events either; pgas's own symmetric
        // buffers carry none anyway.)
        unsafe {
            if tracking {
                ctx.disable_event_tracking();
            }
            let made = buffers.map(|(ptr, len)| {
                // The caller's contract; `Drop` never frees the memory.
                Borrowed(ManuallyDrop::new(stream.upgrade_device_ptr(ptr, len)))
            });
            if tracking {
                ctx.enable_event_tracking();
            }
            made
        }
    }
}

impl<T> Deref for Borrowed<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.0
    }
}

impl<T> DerefMut for Borrowed<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.0
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `leak` drops the handle's events and stream, not the memory.
        unsafe { ManuallyDrop::take(&mut self.0) }.leak();
    }
}

/// Copies `bytes` bytes from `src` to `dst` on `stream`.
fn copy(stream: &CudaStream, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> PyResult<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: both hold `bytes` on this PE's GPU, live until `stream` passes the copy (the
    // caller's tensors, held by the Python call; staging, held by the state).
    unsafe { cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.cu_stream()) }
        .result()
        .map_err(|e| misuse(format!("copying through symmetric staging: {e}")))
}

/// The collectives' plan: the world communicator and the symmetric staging buffers, by dtype
/// and slot (`in`, `out`), each grown (collectively) when a call needs more.
struct Staged {
    comm: RtComm,
    stages: BTreeMap<(&'static str, &'static str), AnyTensor>,
    /// The all-to-all-v layouts agreed so far, by (send counts, receive counts) in elements:
    /// kept until finalize, since a call (or a graph that captured one) reads its table.
    layouts: BTreeMap<(Vec<usize>, Vec<usize>), AllToAllLayout>,
}

impl Staged {
    /// The world communicator, no staging yet (collective).
    fn new(pgas: &Pgas) -> PyResult<Staged> {
        Ok(Staged {
            comm: RtComm::new(pgas, Team::WORLD).map_err(to_py)?,
            stages: BTreeMap::new(),
            layouts: BTreeMap::new(),
        })
    }

    /// Grows staging buffer `slot` of `dtype` to at least `len` elements.
    fn stage(
        &mut self, pgas: &Pgas, (slot, dtype, len): (&'static str, &'static str, usize),
    ) -> PyResult<()> {
        let have = self.stages.get(&(dtype, slot));
        if have.is_none_or(|t| dtype::with_tensor!(t, t => t.len()) < len) {
            // The old buffer first: the heap may not hold both. Work already enqueued may still
            // read it (freed memory can be unmapped), so the GPU finishes that first.
            if have.is_some() {
                finish_gpu(pgas, "pgas's staging")?;
            }
            drop(self.stages.remove(&(dtype, slot)));
            let t = dtype::alloc(pgas, &[len.max(1)], dtype)?;
            self.stages.insert((dtype, slot), t);
        }
        Ok(())
    }
}

/// The bytes of an element of `t`.
fn elem_of<T>(_t: &SymTensor<T>) -> usize {
    std::mem::size_of::<T>()
}

/// The first `len` elements of `t` as a region.
///
/// # Safety
/// `len <= t.len()`, and `t` lives while the region is used.
unsafe fn first<T>(t: &SymTensor<T>, len: usize) -> Region<T>
where
    T: cudarc::driver::DeviceRepr,
{
    // SAFETY: the caller's contract.
    unsafe { Region::new(t.as_device_ptr(), len) }
}

/// `C = A Btᵀ` (`pgas::gemm::gemm_raw`): `c`, `a`, `bt` addresses of `m x n` bf16 and `m x k`,
/// `n x k` bf16 (or e4m3 when `fp8`) elements, on `stream` (pgas's when `None`).
#[pyfunction]
#[pyo3(signature = (c, a, bt, m, n, k, fp8, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _gemm(
    py: Python<'_>, c: u64, a: u64, bt: u64, m: usize, n: usize, k: usize, fp8: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    with_stream(py, stream, |_, pgas, user| {
        stream::on_theirs(pgas, user, |s| {
            // SAFETY: `pgas/torch.py` passes contiguous CUDA tensors of these shapes on this
            // PE's device, which the Python call holds while the stream runs the GEMM (torch's
            // allocator reuses memory only in its stream's order).
            unsafe { pgas::gemm::gemm_raw(pgas, s, (c, a, bt), (m, n, k), fp8) }.map_err(to_py)
        })
    })
}

/// `out = a @ bt.T` on torch tensors when the call may skip the dispatcher (`_untraced`) and
/// all three are what the GEMM takes (contiguous matrices on one GPU: `a` M x K and `bt` N x K,
/// both bfloat16 or both float8_e4m3fn, `out` M x N bfloat16, the shape in the kernel's
/// tiles), on torch's current stream: `True`. Else nothing is done and the answer is `False`,
/// for `pgas.gemm.gemm`'s Python path to run or to say what is wrong (`torch_tensor.rs`).
#[pyfunction]
pub(crate) fn _gemm_into(
    py: Python<'_>, a: &Bound<'_, PyAny>, bt: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    if !untraced(py, [a.clone(), bt.clone(), out.clone()])? {
        return Ok(false);
    }
    let (Some(a), Some(b), Some(c)) = (matrix(a), matrix(bt), matrix(out)) else {
        return Ok(false);
    };
    let (m, n, k) = (a.rows, b.rows, a.cols);
    let fp8 = a.elem == Some(Elem::E4m3);
    let takes = a.elem.is_some()
        && a.elem == b.elem
        && c.elem == Some(Elem::Bf16)
        && (a.device, c.device) == (b.device, b.device)
        && b.cols == k
        && (c.rows, c.cols) == (m, n)
        && pgas::gemm::raw_shape_error(m, n, k, fp8).is_none();
    if !takes {
        return Ok(false);
    }
    let stream = current_stream(py, a.device)?;
    _gemm(py, c.ptr, a.ptr, b.ptr, m, n, k, fp8, Some(&stream))?;
    Ok(true)
}

/// The grouped GEMM (`pgas::gemm::gemm_grouped`): `c` (m x n bf16) = each 128-row tile of `a`
/// (m x k, bf16 or e4m3 when `fp8`) times the `bt` (`groups` matrices of n x k, one under the
/// other) of its group in `group_of` (int32, one a tile), on `stream` (pgas's when `None`).
#[pyfunction]
#[pyo3(signature = (c, a, bt, group_of, m, n, k, groups, fp8=false, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _gemm_grouped(
    py: Python<'_>, c: u64, a: u64, bt: u64, group_of: u64, m: usize, n: usize, k: usize,
    groups: usize, fp8: bool, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    with_stream(py, stream, |_, pgas, user| {
        stream::on_theirs(pgas, user, |s| {
            let cfg = pgas::gemm::GemmConfig::for_grouped(m, n, pgas.sm_count().map_err(to_py)?);
            // SAFETY: `pgas/_torch_ops.py` passes contiguous CUDA tensors of these sizes on this
            // PE's device, held by the Python call while the stream runs the GEMM.
            let ([mut cs], [table]) = unsafe {
                (
                    Borrowed::<bf16>::each(s, [(c, m * n)]),
                    Borrowed::<i32>::each(s, [(group_of, m.div_ceil(128))]),
                )
            };
            let operands = (a, bt, &*table);
            // SAFETY: as above; A and Bt hold m x k and groups x n x k elements of the dtype
            // `fp8` names.
            unsafe {
                if fp8 {
                    grouped_on::<e4m3>(pgas, s, &mut cs, operands, (m, n, k), groups, cfg)
                } else {
                    grouped_on::<bf16>(pgas, s, &mut cs, operands, (m, n, k), groups, cfg)
                }
            }
            .map_err(to_py)
        })
    })
}

/// [`_gemm_grouped`]'s launch with A and Bt of `T` at addresses `a` and `bt`.
///
/// # Safety
/// `a` and `bt` hold `m x k` and `groups x n x k` elements of `T` on this PE's GPU until `s`
/// has run the GEMM.
#[allow(clippy::too_many_arguments)]
unsafe fn grouped_on<T: pgas::gemm::Operand>(
    pgas: &Pgas, s: &Arc<CudaStream>, c: &mut CudaSlice<bf16>,
    (a, bt, table): (u64, u64, &CudaSlice<i32>), (m, n, k): (usize, usize, usize), groups: usize,
    cfg: pgas::gemm::GemmConfig,
) -> pgas::Result<()> {
    // SAFETY: the caller's contract.
    let [a_s, b_s] = unsafe { Borrowed::<T>::each(s, [(a, m * k), (bt, groups * n * k)]) };
    pgas::gemm::gemm_grouped_with(pgas, s, c, &a_s, &b_s, table, (m, n, k), groups, cfg, false)
}

/// Where groups of `counts` rows go in the grouped GEMM's layout (`pgas::gemm::GroupedRows`):
/// each group's first row, all the rows (M), and each 128-row tile's group.
#[pyfunction]
pub(crate) fn _grouped_rows(counts: Vec<usize>) -> (Vec<usize>, usize, Vec<i32>) {
    let g = pgas::gemm::GroupedRows::new(&counts);
    (g.starts, g.m, g.group_of)
}

/// One of `pgas::coll`'s collectives over every PE (`kind`: `all_reduce`, `reduce_scatter`,
/// `all_gather`, `broadcast`, `all_to_all`) from `src_len` elements at `src` into `dst_len` at
/// `dst`, both of `dtype`, staged through symmetric memory on `stream`. Returns the algorithm
/// used.
#[pyfunction]
#[pyo3(signature = (kind, dst, src, dst_len, src_len, dtype, op="sum", root=0, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _collective(
    py: Python<'_>, kind: &str, dst: u64, src: u64, dst_len: usize, src_len: usize,
    dtype: &Bound<'_, PyAny>, op: &str, root: usize, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    let dtype = dtype::parse(dtype)?;
    let op = reduce_op_of(op)?;
    const KINDS: [&str; 5] = [
        "all_reduce",
        "reduce_scatter",
        "all_gather",
        "broadcast",
        "all_to_all",
    ];
    let Some(kind) = KINDS.into_iter().find(|k| *k == kind) else {
        return Err(misuse(format!(
            "unknown collective {kind:?}: one of {}",
            KINDS.join(", ")
        )));
    };
    with_stream(py, stream, move |state, pgas, user| {
        stream::on_theirs(pgas, user, |s| {
            state.with_plan("coll", |_| true, || Staged::new(pgas), |plan: &mut Staged| {
                plan.stage(pgas, ("in", dtype, src_len))?;
                plan.stage(pgas, ("out", dtype, dst_len))?;
                let Staged { comm, stages, .. } = plan;
                let how = Algorithm::Auto.on(s);
                let (stage_in, stage_out) = (&stages[&(dtype, "in")], &stages[&(dtype, "out")]);
                let (used, so, elem) = with_pair!(stage_out, stage_in, (o, i) => {
                    let elem = elem_of(o);
                    copy(s, i.as_device_ptr(), src, src_len * elem)?;
                    // SAFETY: `stage` grew both to these lengths; they live in the state.
                    let (d, i) = unsafe { (&mut first(o, dst_len), &first(i, src_len)) };
                    let used = match kind {
                        "all_reduce" => comm.all_reduce(d, i, op, how),
                        "reduce_scatter" => comm.reduce_scatter(d, i, op, how),
                        "all_gather" => comm.all_gather(d, i, how),
                        "broadcast" => comm.broadcast(d, i, root, how),
                        _ => comm.all_to_all(d, i, how),
                    };
                    (used.map_err(to_py)?, o.as_device_ptr(), elem)
                }, else return Err(misuse(format!("the staging buffers of {dtype} differ in dtype"))));
                copy(s, dst, so, dst_len * elem)?;
                Ok(crate::coll::name_of(used))
            })
        })
    })
}

/// All-to-all with per-PE counts (`pgas::coll::Comm::all_to_all_v`) over every PE: this PE sends
/// `send_counts[q]` elements of `src` (packed in PE order) to PE `q` and receives
/// `recv_counts[p]` from PE `p` into `dst` (packed in PE order), both of `dtype`, staged through
/// symmetric memory on `stream`. Each new pair of counts is agreed once (a host exchange) and
/// kept. Collective.
#[pyfunction]
#[pyo3(signature = (dst, src, send_counts, recv_counts, dtype, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _all_to_all_v(
    py: Python<'_>, dst: u64, src: u64, send_counts: Vec<usize>, recv_counts: Vec<usize>,
    dtype: &Bound<'_, PyAny>, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let dtype = dtype::parse(dtype)?;
    let displs = |counts: &[usize]| -> Vec<usize> {
        counts
            .iter()
            .scan(0, |at, &c| {
                *at += c;
                Some(*at - c)
            })
            .collect()
    };
    let (src_len, dst_len): (usize, usize) = (send_counts.iter().sum(), recv_counts.iter().sum());
    with_stream(py, stream, move |state, pgas, user| {
        stream::on_theirs(pgas, user, |s| {
            state.with_plan("coll", |_| true, || Staged::new(pgas), |plan: &mut Staged| {
                let key = (send_counts.clone(), recv_counts.clone());
                if !plan.layouts.contains_key(&key) {
                    let layout = plan
                        .comm
                        .all_to_all_layout(
                            &send_counts,
                            &displs(&send_counts),
                            &recv_counts,
                            &displs(&recv_counts),
                        )
                        .map_err(to_py)?;
                    plan.layouts.insert(key.clone(), layout);
                }
                // The staging is symmetric, so it is grown to the lengths of the PE that needs
                // the most (the layout's, the same on every PE), not to this PE's counts.
                let layout = &plan.layouts[&key];
                let (stage_src, stage_dst) = (layout.src_len(), layout.dst_len());
                plan.stage(pgas, ("in", dtype, stage_src))?;
                plan.stage(pgas, ("out", dtype, stage_dst))?;
                let Staged {
                    comm,
                    stages,
                    layouts,
                } = plan;
                let layout = &layouts[&key];
                let (stage_in, stage_out) = (&stages[&(dtype, "in")], &stages[&(dtype, "out")]);
                let (so, elem) = with_pair!(stage_out, stage_in, (o, i) => {
                    let elem = elem_of(o);
                    copy(s, i.as_device_ptr(), src, src_len * elem)?;
                    // SAFETY: `stage` grew both to these lengths; they live in the state.
                    let (d, i) = unsafe { (&mut first(o, stage_dst), &first(i, stage_src)) };
                    comm.all_to_all_v(d, i, layout, Algorithm::Auto.on(s)).map_err(to_py)?;
                    (o.as_device_ptr(), elem)
                }, else return Err(misuse(format!("the staging buffers of {dtype} differ in dtype"))));
                copy(s, dst, so, dst_len * elem)
            })
        })
    })
}

/// `C = all_gather_rows(shard) Btᵀ` (`pgas::ops::AllGatherMatmul`, its plan made at the first
/// call of the shape, collectively): `c` (`mp x P` rows by `n`), `shard` (`mp x k`), `bt`
/// (`n x k`), bf16, ordered on `stream`. Collective.
#[pyfunction]
#[pyo3(signature = (c, shard, bt, mp, n, k, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _all_gather_matmul(
    py: Python<'_>, c: u64, shard: u64, bt: u64, mp: usize, n: usize, k: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    with_stream(py, stream, |state, pgas, user| {
        let key = format!("all_gather_matmul/{mp}x{n}x{k}");
        let make = || AllGatherMatmul::new(pgas, (mp, n, k)).map_err(to_py);
        state.with_plan(
            &key,
            |_| true,
            make,
            |op: &mut AllGatherMatmul| {
                // The op runs on pgas's stream (its copies fork from it).
                stream::through_pgas_stream(pgas, user, || {
                    let s = pgas.stream();
                    let m = mp * pgas.n_pes();
                    // SAFETY: `pgas/torch.py` passes contiguous bf16 CUDA tensors of these shapes
                    // on this device, held by the Python call while the streams run the op.
                    let [mut c, shard, bt] = unsafe {
                        Borrowed::<bf16>::each(s, [(c, m * n), (shard, mp * k), (bt, n * k)])
                    };
                    op.run(&mut *c, &*shard, &*bt).map_err(to_py)
                })
            },
        )
    })
}

/// `out` = this PE's `m / P` rows of the sum over PEs of `A Btᵀ` (`pgas::ops::
/// MatmulReduceScatter`, its plan made at the first call of the shape, collectively): `a`
/// (`m x k`, this PE's K slice), `bt` (`n x k`), `out` (`m / P x n`), bf16, on `stream`.
/// Collective.
#[pyfunction]
#[pyo3(signature = (out, a, bt, m, n, k, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _matmul_reduce_scatter(
    py: Python<'_>, out: u64, a: u64, bt: u64, m: usize, n: usize, k: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    with_stream(py, stream, |state, pgas, user| {
        let key = format!("matmul_reduce_scatter/{m}x{n}x{k}");
        let make = || MatmulReduceScatter::new(pgas, (m, n, k)).map_err(to_py);
        state.with_plan(
            &key,
            |_| true,
            make,
            |op: &mut MatmulReduceScatter| {
                stream::on_theirs(pgas, user, |s| {
                    let rows = m / pgas.n_pes();
                    // SAFETY: as in `_all_gather_matmul`.
                    let [mut out, a, bt] = unsafe {
                        Borrowed::<bf16>::each(s, [(out, rows * n), (a, m * k), (bt, n * k)])
                    };
                    op.run(pgas, s, &mut out, &a, &bt).map_err(to_py)
                })
            },
        )
    })
}

/// The all-reduce + RMSNorm's plan for one hidden size and epsilon: the op and its symmetric
/// staging (x, residual, weight, out), for up to `max_tokens` tokens.
struct RmsNormPlan {
    op: AllReduceRmsNorm,
    stage: [SymTensor<bf16>; 4],
}

impl RmsNormPlan {
    /// For `tokens` tokens: the next power of two, so that growing calls remake it rarely.
    fn new(pgas: &Pgas, hidden: usize, tokens: usize, eps: f32) -> PyResult<RmsNormPlan> {
        let max = tokens.max(1).next_power_of_two();
        let alloc = |len: usize| pgas.alloc::<bf16>(len).map_err(to_py);
        Ok(RmsNormPlan {
            op: AllReduceRmsNorm::new(pgas, hidden, max, eps).map_err(to_py)?,
            stage: [
                alloc(max * hidden)?,
                alloc(max * hidden)?,
                alloc(hidden)?,
                alloc(max * hidden)?,
            ],
        })
    }
}

/// `residual_out = sum over PEs of x + residual` and `out = RMSNorm(residual_out) * weight`
/// (`pgas::ops::AllReduceRmsNorm`), for `tokens` rows of `hidden` bf16, staged through
/// symmetric memory on `stream`; returns the algorithm used. Collective.
#[pyfunction]
#[pyo3(signature = (out, residual_out, x, residual, weight, tokens, hidden, eps, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _allreduce_rmsnorm(
    py: Python<'_>, out: u64, residual_out: u64, x: u64, residual: u64, weight: u64, tokens: usize,
    hidden: usize, eps: f32, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<&'static str> {
    with_stream(py, stream, |state, pgas, user| {
        let key = format!("allreduce_rmsnorm/{hidden}/{:08x}", eps.to_bits());
        let make = || RmsNormPlan::new(pgas, hidden, tokens, eps);
        let fits = |plan: &RmsNormPlan| plan.op.max_tokens() >= tokens;
        state.with_plan(&key, fits, make, |plan: &mut RmsNormPlan| {
            stream::on_theirs(pgas, user, |s| {
                let (len, bytes) = (tokens * hidden, tokens * hidden * 2);
                let [sx, sr, sw, so] = &mut plan.stage;
                let addr = |t: &SymTensor<bf16>| t.as_device_ptr();
                copy(s, addr(sx), x, bytes)?;
                copy(s, addr(sr), residual, bytes)?;
                copy(s, addr(sw), weight, hidden * 2)?;
                // SAFETY: the plan's staging holds at least these lengths and lives in the state.
                let used = unsafe {
                    plan.op.run(
                        &first(sx, len),
                        &mut first(sr, len),
                        &*sw,
                        &mut first(so, len),
                        Algorithm::Auto.on(s),
                    )
                }
                .map_err(to_py)?;
                copy(s, residual_out, addr(sr), bytes)?;
                copy(s, out, addr(so), bytes)?;
                Ok(crate::coll::name_of(used))
            })
        })
    })
}

/// The low-latency MoE of one configuration (`max_tokens`, `hidden`, `top_k`,
/// `experts_per_pe`): its plan's key and the configuration.
fn moe_plan(cfg: [usize; 4]) -> (String, MoeConfig) {
    let [max_tokens, hidden, top_k, experts_per_pe] = cfg;
    let key = format!("moe/{max_tokens}x{hidden}x{top_k}x{experts_per_pe}");
    let cfg = MoeConfig {
        max_tokens,
        hidden,
        top_k,
        experts_per_pe,
    };
    (key, cfg)
}

/// Runs `f` on the low-latency MoE of `cfg` (made at its first use, collectively).
fn with_moe<R>(
    state: &State, pgas: &Pgas, cfg: [usize; 4], f: impl FnOnce(&mut LowLatencyMoe) -> PyResult<R>,
) -> PyResult<R> {
    let (key, cfg) = moe_plan(cfg);
    let make = || LowLatencyMoe::new(pgas, cfg).map_err(to_py);
    state.with_plan(&key, |_| true, make, f)
}

/// Runs `f` on the low-latency MoE of `cfg` as an operation of `stream` (the MoE runs on
/// pgas's stream, ordered with it).
fn moe_call(
    py: Python<'_>, stream: Option<&Bound<'_, PyAny>>, cfg: [usize; 4],
    f: impl FnOnce(&Pgas, &mut LowLatencyMoe) -> PyResult<()> + Send,
) -> PyResult<()> {
    with_stream(py, stream, |state, pgas, user| {
        with_moe(state, pgas, cfg, |ll| {
            stream::through_pgas_stream(pgas, user, || f(pgas, ll))
        })
    })
}

/// A receive buffer of the low-latency MoE as `pgas.ops.MoE` views it: (name, address, shape,
/// dtype).
type MoeView = (&'static str, u64, Vec<usize>, &'static str);

/// The receive buffers of `ll`, the MoE of `cfg`:
/// `recv_x`, `recv_src` and `recv_counts`, in `LowLatencyMoe`'s layout by local expert and
/// source PE.
fn moe_views(ll: &LowLatencyMoe, n: usize, [m, h, _, el]: [usize; 4]) -> [MoeView; 3] {
    [
        (
            "recv_x",
            ll.recv_x().as_device_ptr(),
            vec![el, n * m, h],
            "bfloat16",
        ),
        (
            "recv_src",
            ll.recv_src().as_device_ptr(),
            vec![el, n * m],
            "int32",
        ),
        (
            "recv_counts",
            ll.recv_counts().as_device_ptr(),
            vec![el, n],
            "int32",
        ),
    ]
}

/// The receive buffers of the low-latency MoE of `cfg` (`[max_tokens, hidden, top_k,
/// experts_per_pe]`), made at the first call for it (collective), as `moe_views` gives them.
/// They live until finalize; `pgas.ops.MoE` makes torch views of them.
#[pyfunction]
pub(crate) fn _moe_buffers(py: Python<'_>, cfg: [usize; 4]) -> PyResult<[MoeView; 3]> {
    with_stream(py, None, |state, pgas, _| {
        with_moe(state, pgas, cfg, |ll| Ok(moe_views(ll, pgas.n_pes(), cfg)))
    })
}

/// MoE dispatch in the low-latency mode (`LowLatencyMoe::dispatch`) of `tokens` rows of `x`
/// (bf16, `hidden` each) by `idx` (int32) and `w` (f32), `tokens * top_k` each, into the receive
/// buffers of `cfg`'s MoE, ordered on `stream`; `recv` the addresses the caller takes for
/// those buffers (`recv_x`, `recv_src`, `recv_counts`), checked. Collective.
#[pyfunction]
#[pyo3(signature = (x, idx, w, tokens, cfg, recv, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _moe_dispatch(
    py: Python<'_>, x: u64, idx: u64, w: u64, tokens: usize, cfg: [usize; 4], recv: [u64; 3],
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let [_, h, k, _] = cfg;
    moe_call(py, stream, cfg, |pgas, ll| {
        let views = moe_views(ll, pgas.n_pes(), cfg);
        if let Some((name, ..)) = views.iter().zip(recv).find(|(v, r)| v.1 != *r).map(|p| p.0) {
            return Err(misuse(format!(
                "moe_dispatch: {name} is not the receive buffer of the MoE of {cfg:?} \
                 ([max_tokens, hidden, top_k, experts_per_pe]); pass the MoE's own \
                 (pgas.ops.MoE.dispatch does)"
            )));
        }
        let s = pgas.stream();
        // SAFETY: `pgas/_torch_ops.py` passes contiguous CUDA tensors of these lengths on this
        // device, held by the Python call while the stream runs the kernel.
        let ([x], [idx], [w]) = unsafe {
            (
                Borrowed::<bf16>::each(s, [(x, tokens * h)]),
                Borrowed::<i32>::each(s, [(idx, tokens * k)]),
                Borrowed::<f32>::each(s, [(w, tokens * k)]),
            )
        };
        ll.dispatch(&x, &idx, &w, tokens).map_err(to_py)
    })
}

/// MoE combine in the low-latency mode (`LowLatencyMoe::combine`) after the last dispatch of
/// `cfg`'s MoE: `expert_out` (bf16, laid out as the receive rows) comes back to the tokens' PEs
/// and `out` (`tokens x hidden` bf16) gets each token's weighted sum, ordered on `stream`.
/// Collective.
#[pyfunction]
#[pyo3(signature = (out, expert_out, idx, tokens, cfg, stream=None))]
pub(crate) fn _moe_combine(
    py: Python<'_>, out: u64, expert_out: u64, idx: u64, tokens: usize, cfg: [usize; 4],
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let [_, h, k, _] = cfg;
    moe_call(py, stream, cfg, |pgas, ll| {
        let s = pgas.stream();
        let rows = [(out, tokens * h), (expert_out, ll.expert_out_len())];
        // SAFETY: as in `_moe_dispatch`.
        let ([mut out, expert_out], [idx]) = unsafe {
            (
                Borrowed::<bf16>::each(s, rows),
                Borrowed::<i32>::each(s, [(idx, tokens * k)]),
            )
        };
        ll.combine(&expert_out, &idx, tokens, &mut out)
            .map_err(to_py)
    })
}

/// Adds the library's functions to the module (private: `pgas/_torch_ops.py` calls them).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gemm, m)?)?;
    m.add_function(wrap_pyfunction!(_gemm_into, m)?)?;
    m.add_function(wrap_pyfunction!(_untraced, m)?)?;
    m.add_function(wrap_pyfunction!(_gemm_grouped, m)?)?;
    m.add_function(wrap_pyfunction!(_grouped_rows, m)?)?;
    m.add_function(wrap_pyfunction!(_collective, m)?)?;
    m.add_function(wrap_pyfunction!(_all_to_all_v, m)?)?;
    m.add_function(wrap_pyfunction!(_all_gather_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(_matmul_reduce_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(_allreduce_rmsnorm, m)?)?;
    m.add_function(wrap_pyfunction!(_moe_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(_moe_dispatch, m)?)?;
    m.add_function(wrap_pyfunction!(_moe_combine, m)?)?;
    Ok(())
}
