//! The module a kernel becomes: SPEC and launchers typed like the kernel.
use pgas::prelude::*;

#[pgas_kernel]
fn everything(
    #[comptime] block: u32, dst: &mut SymTensor<f32>, src: &SymTensor<f32>,
    sig: &mut SymTensor<u64>, local: &mut CudaSlice<f32>, table: &CudaSlice<i32>, team: Team,
    scale: f32, flag: bool,
) {
    let s = shared_array::<f32, block>();
    let t = thread_idx_x() as usize;
    if flag && t < local.len() && t < block as usize {
        s[t] = src[t] * scale + table[t] as f32;
        local[t] = s[t];
    }
    put_signal_block(
        dst,
        src,
        &mut sig[0],
        1,
        SignalOp::Set,
        team_translate_pe(team, 0, team),
    );
    barrier_all_block();
}

#[allow(dead_code, clippy::too_many_arguments)]
fn host(
    pgas: &Pgas, cfg: LaunchConfig, dst: &mut SymTensor<f32>, src: &SymTensor<f32>,
    sig: &mut SymTensor<u64>, local: &mut CudaSlice<f32>, table: &CudaSlice<i32>, team: Team,
) -> pgas::Result<()> {
    everything::launch(pgas, cfg, 256, dst, src, sig, local, table, team, 2.0, true)
}

pub fn check() {
    let spec = &everything::SPEC;
    assert_eq!(spec.rust_name, "everything");
    assert!(spec.collective);
    assert!(spec.cuda_name.starts_with("pgas_everything_"));
    assert!(spec.file.ends_with("launchers.rs"));
    assert!(spec.plain_source.contains("launchers.rs\""));
    assert_eq!(spec.params.len(), 9);
    let names: Vec<&str> = spec.comptime_names().collect();
    assert_eq!(names, ["block"]);
    assert!(spec.checked_source.contains("pgas_check_index"));
    assert!(spec.plain_source.contains("PGAS_CT_block"));
    // Lines come from the macro's spans: the `fn` name and the first statement.
    assert_eq!(spec.line, 5);
    assert!(spec.plain_source.contains("#line 10 PGAS_RUST_FILE"));
}
