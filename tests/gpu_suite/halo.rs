//! `pgas::ops::halo` and the fused stencil of `examples/jacobi2d.rs`: the exchange alone (each
//! halo row holds the neighbour's edge row, over several iterations), the fused and unfused
//! Jacobi against the host's smoother bit for bit in every form (uneven slabs, fused launches
//! split and mixed with unfused iterations, one block and all resident blocks), and every bad
//! input (forms no kernel has included), which must
//! be an `Err` on every PE with no PE left waiting.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::ops::halo::{halo_rows, Halo2d};
use pgas::ops::jacobi::{self, Method};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("halo/exchange_rows", exchange_rows),
    case("halo/jacobi_fused_vs_host", jacobi_vs_host),
    case("halo/bad_input", bad_input),
];

/// Prewarmed without comptime values, so only `halo_rows`: the Jacobi kernels take their form
/// as comptime values and compile, one specialization per form, when the case first runs it.
pub const KERNELS: &[&KernelSpec] = &[&halo_rows::SPEC];

/// Rows of PE `pe`'s slab in these cases: uneven, so halo rows land at different offsets.
fn rows_of(pe: usize) -> usize {
    5 + 3 * (pe % 3)
}

/// Value of global row `r`, column `c` in iteration `e` of the exchange-only case.
fn mark(e: u64, r: usize, c: usize) -> f32 {
    (e * 100_000 + r as u64 * 100 + c as u64) as f32
}

/// Three exchanges with no stencil: before each, every PE writes marks into its rows of the
/// current plane (a stand-in for the stencil), then checks its halo rows hold the neighbours'
/// edge rows of that iteration.
fn exchange_rows(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let nx = 12;
    let rows: Vec<usize> = (0..n).map(rows_of).collect();
    let starts = jacobi::row_starts(&rows);
    let total: usize = rows.iter().sum();
    let mut h = Halo2d::new(p, nx, rows[me])?;
    let stream = p.stream().clone();
    let mut bad = Vec::new();
    for e in 0..3u64 {
        let mine: Vec<f32> = (0..rows[me] * nx)
            .map(|i| mark(e, starts[me] + i / nx, i % nx))
            .collect();
        let cur = h.current();
        h.parts_mut()
            .field
            .view_mut(cur + nx..cur + (rows[me] + 1) * nx)?
            .copy_from(&mine)?;
        h.exchange_on(&stream)?;
        stream.synchronize()?;
        let field = &*h.parts_mut().field;
        let top = field.view(cur..cur + nx)?.to_vec()?;
        let bottom = field
            .view(cur + (rows[me] + 1) * nx..cur + (rows[me] + 2) * nx)?
            .to_vec()?;
        let above = (starts[me] + total - 1) % total;
        let below = (starts[me] + rows[me]) % total;
        let want_top: Vec<f32> = (0..nx).map(|c| mark(e, above, c)).collect();
        let want_bottom: Vec<f32> = (0..nx).map(|c| mark(e, below, c)).collect();
        if top != want_top || bottom != want_bottom {
            bad.push(format!(
                "iteration {e}: top halo {top:?} (want {want_top:?}), bottom {bottom:?} (want {want_bottom:?})"
            ));
        }
        // The marks of the next iteration go into the other plane, as a stencil's would.
        h.advance(1);
        p.barrier_all()?;
    }
    ensure(bad.is_empty(), || bad.join("; "))
}

/// The example's runs, on slabs of 5, 8 and 11 rows of 64 columns: fused launches of 3 and 4
/// iterations, 2 unfused, fused 5 (14 in all) with every resident block, and 14 fused on one
/// block, both equal to the host's smoother bit for bit, in every form of the fused kernel
/// (`jacobi::FORMS`: the rolled sweep, batches of 2 and 4 rows in 1024-thread blocks, of 4 and 8
/// rows in 512-thread blocks; the unfused iterations in the same sweep); then the same at 2048
/// columns, where a sweep's work item takes several rows (2 to 11 on one block: the rolled
/// form's next row ahead of the arithmetic, the batched forms' full and partial batches, a last
/// item shorter than the others), which 64 columns never do (a block has a thread per vector of
/// every row there). `Fused::for_size` picks among these forms, so `Method::Fused` is covered too.
fn jacobi_vs_host(p: &Pgas) -> CaseResult {
    for form in jacobi::FORMS {
        jacobi_vs_host_at(p, 64, form)?;
        jacobi_vs_host_at(p, 2048, form)?;
    }
    Ok(())
}

fn jacobi_vs_host_at(p: &Pgas, nx: usize, form: jacobi::Fused) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let rows: Vec<usize> = (0..n).map(rows_of).collect();
    let starts = jacobi::row_starts(&rows);
    let total: usize = rows.iter().sum();
    let whole: Vec<f32> = (0..total * nx)
        .map(|i| jacobi::initial(i / nx, i % nx))
        .collect();
    let mine = &whole[starts[me] * nx..(starts[me] + rows[me]) * nx];
    let stream = p.stream().clone();
    let mut h = Halo2d::new(p, nx, rows[me])?;
    h.write_interior(mine)?;
    let blocks = h.resident_blocks();
    jacobi::run(&mut h, &stream, Method::FusedAs(form), 3, blocks, true)?;
    jacobi::run(&mut h, &stream, Method::FusedAs(form), 4, blocks, true)?;
    jacobi::run(
        &mut h,
        &stream,
        Method::Unfused(form.sweep),
        2,
        blocks,
        true,
    )?;
    jacobi::run(&mut h, &stream, Method::FusedAs(form), 5, blocks, true)?;
    let mixed = h.read_interior()?;
    let mut one = Halo2d::new(p, nx, rows[me])?;
    one.write_interior(mine)?;
    jacobi::run(&mut one, &stream, Method::FusedAs(form), 14, 1, true)?;
    let single = one.read_interior()?;
    p.barrier_all()?;
    let want = jacobi::host_jacobi(&whole, nx, 14);
    let want: Vec<u32> = want[starts[me] * nx..(starts[me] + rows[me]) * nx]
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    check_eq(
        &format!("{form:?}: fused/unfused mix on {blocks} blocks, nx {nx}"),
        &bits(&mixed),
        &want,
    )?;
    check_eq(
        &format!("{form:?}: fused on one block, nx {nx}"),
        &bits(&single),
        &want,
    )
}

/// Every bad input is an `Err` on every PE; the PEs then go on together (the next call is a
/// collective allocation, which would hang if one PE had been left behind).
fn bad_input(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let mut fails = Vec::new();
    let mut expect_err = |what: &str, r: pgas::Result<()>, needle: &str| match r {
        Err(e) if e.to_string().contains(needle) => {}
        Err(e) => fails.push(format!("{what}: error does not say `{needle}`: {e}")),
        Ok(()) => fails.push(format!("{what}: accepted")),
    };
    if n > 1 {
        let nx = 64 + 4 * (me % 2);
        expect_err("nx differs", Halo2d::new(p, nx, 8).map(drop), "same nx");
    }
    let rows = if me == n - 1 { 1 } else { 8 };
    expect_err(
        "a slab of 1 row",
        Halo2d::new(p, 64, rows).map(drop),
        "at least 2 rows",
    );
    let huge = p.heap_size() / 16 + 1;
    expect_err(
        "a field over the heap",
        Halo2d::new(p, huge, 2).map(drop),
        "heap",
    );
    let stream = p.stream().clone();
    let mut h = Halo2d::new(p, 64, 8)?;
    let too_many = h.resident_blocks() + 1;
    expect_err(
        "more blocks than can be resident",
        jacobi::run(&mut h, &stream, Method::Fused, 2, too_many, true),
        "resident",
    );
    expect_err(
        "no blocks",
        jacobi::run(&mut h, &stream, Method::Fused, 2, 0, true),
        "resident",
    );
    expect_err(
        "an interior of the wrong length",
        h.write_interior(&[0.0; 64 * 7]),
        "rows * nx",
    );
    let no_kernel = jacobi::Fused {
        sweep: jacobi::Sweep::Batched { depth: 4 },
        threads: 256,
    };
    expect_err(
        "a block size no fused kernel has",
        jacobi::run(&mut h, &stream, Method::FusedAs(no_kernel), 2, 1, true),
        "threads 1024 or 512",
    );
    let too_deep = jacobi::Fused {
        sweep: jacobi::Sweep::Batched {
            depth: jacobi::MAX_DEPTH + 1,
        },
        threads: 512,
    };
    expect_err(
        "a batch deeper than the kernels hold",
        jacobi::run(&mut h, &stream, Method::FusedAs(too_deep), 2, 1, true),
        "depth from 1 to",
    );
    let mut odd = Halo2d::new(p, 6, 8)?;
    expect_err(
        "rows that are not whole vectors",
        jacobi::run(&mut odd, &stream, Method::Fused, 2, 1, true),
        "multiple of 4",
    );
    // After an iteration the field can no longer be written.
    jacobi::run(&mut h, &stream, Method::Fused, 2, 1, true)?;
    expect_err(
        "writing after the first iteration",
        h.write_interior(&[0.0; 64 * 8]),
        "before the first exchange",
    );
    stream.synchronize()?;
    p.barrier_all()?;
    ensure(fails.is_empty(), || fails.join("; "))
}
