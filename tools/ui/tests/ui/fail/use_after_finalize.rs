// Use after finalize cannot be written: NVSHMEM finalizes when the last `Pgas` handle and the
// last `SymTensor` (each holds the handle) are dropped, so anything that could still touch
// NVSHMEM keeps it alive. What is left to get wrong, the borrow checker refuses: a view of a
// freed tensor, and a handle used after it was dropped.

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let t = pgas.alloc::<f32>(8)?;
    let view = t.view(0..4)?;
    drop(t);
    view.to_vec()?;
    drop(pgas);
    pgas.barrier_all()?;
    Ok(())
}
