//! Every specialization `pgas::coll` can launch (`coll::prewarm_all`: each algorithm, element
//! type and reduction), compiled by NVRTC for sm_90 as the JIT would, as one program per prelude:
//! no errors, no warnings.

use pgas_codegen::{batch, specialize, Prelude};

#[test]
fn every_collective_specialization_compiles_without_warnings() {
    let tc = crate::toolchain();
    let list = pgas::coll::prewarm_all();
    // 8 integer types x 7 ops + 4 float types x 4 ops for each of low-latency, one-shot,
    // two-shot (its three forms), reduce-scatter and low-latency reduce-scatter, and three all-gathers (pushing:
    // two-shot's half; pulling; low-latency), three broadcasts (one-shot, two-shot,
    // low-latency), three all-to-alls (pushing, pulling, low-latency) and all-to-all-v of each
    // element size (1, 2, 4, 8 bytes).
    assert_eq!(list.len(), 7 * (8 * 7 + 4 * 4) + 4 * 10);
    let mut by_prelude: Vec<(Prelude, Vec<String>)> = Vec::new();
    for k in &list {
        let pairs: Vec<(&str, i128)> = k
            .spec
            .comptime_names()
            .zip(k.comptime.iter().copied())
            .collect();
        let (src, _) = specialize(
            k.spec.source(k.variant),
            k.spec.cuda_name,
            k.variant.as_str(),
            &pairs,
        );
        let prelude = Prelude::of_source(&src).expect("a source starts with a prelude");
        match by_prelude.iter_mut().find(|(p, _)| *p == prelude) {
            Some((_, v)) => v.push(src),
            None => by_prelude.push((prelude, vec![src])),
        }
    }
    // Point-to-point only: the collectives use no NVSHMEM collective templates, so they
    // compile fast.
    assert!(
        by_prelude.iter().all(|(p, _)| *p == Prelude::P2p),
        "a collective kernel needs a heavier prelude than the point-to-point one"
    );
    for (prelude, sources) in by_prelude {
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let program = batch(prelude.text(), &refs).expect("sources start with their prelude");
        // Inline, and as the JIT compiles them by default (link-time, against the NVSHMEM
        // library), at once: each is one single-threaded NVRTC program of minutes. The inline
        // one with `--Ofast-compile=max`, as tests/nvrtc/corpus.rs compiles: it changes the
        // optimization, not what the front end accepts or warns about.
        let mut options = tc.options((9, 0), &program);
        options.push("--Ofast-compile=max".to_owned());
        let (out, linked) = std::thread::scope(|s| {
            let inline = s.spawn(|| tc.compile_with(&program, "pgas_coll", (9, 0), &options));
            let linked = tc.compile_program(None, &program, "pgas_coll_linked", (9, 0));
            (inline.join().expect("the inline compile's thread"), linked)
        });
        let out = out.unwrap_or_else(|e| panic!("NVRTC rejected the collectives: {e}"));
        assert_eq!(out.warnings().count(), 0, "warnings:\n{}", out.log);
        let linked = linked
            .unwrap_or_else(|e| panic!("the link-time compile of the collectives failed: {e}"));
        assert_eq!(linked.warnings().count(), 0, "warnings:\n{}", linked.log);
        assert!(tc.linker().is_some(), "scripts/deps.sh installs nvJitLink");
    }
}
