//! A parameter group: the kernel takes it as one destructuring parameter, which stands for its
//! fields in the struct's order, in the kernel's signature and in its launchers; a group from
//! another module comes with its hidden macro, and a kernel may call device functions too. Or
//! the kernel takes it whole under a name, reads its fields and passes it on whole to a device
//! function (of another module) that takes one.
use pgas::prelude::*;

mod groups {
    use pgas::prelude::*;

    #[pgas_params]
    pub struct Ring {
        pes: &SymTensor<i32>,
        flags: &mut SymTensor<u64>,
        n: u32,
        me: u32,
    }

    /// The next rank's PE.
    #[pgas_device]
    pub fn next_pe(ring: Ring) -> i32 {
        ring.pes[((ring.me + 1) % ring.n) as usize]
    }
}

use groups::{__pgas_device_next_pe, __pgas_params_Ring};

#[pgas_device]
fn next(me: u32, n: u32) -> u32 {
    (me + 1) % n
}

#[pgas_kernel(max_threads = 64)]
fn pass_on(x: &mut SymTensor<f32>, Ring { me, n, flags, pes }: Ring, v: f32) {
    let to = next(me, n);
    x.peer(pes[to as usize])[0] = v;
    flags[0] = 1;
}

/// The group whole: its fields by name, and the group passed on whole.
#[pgas_kernel(max_threads = 64)]
fn pass_whole(x: &mut SymTensor<f32>, ring: Ring, v: f32) {
    x.peer(next_pe(ring))[0] = v;
    ring.flags[0] = 1;
}

/// The same kernel with its parameters listed.
#[pgas_kernel(max_threads = 64)]
fn pass_on_listed(
    x: &mut SymTensor<f32>, pes: &SymTensor<i32>, flags: &mut SymTensor<u64>, n: u32, me: u32,
    v: f32,
) {
    let to = next(me, n);
    x.peer(pes[to as usize])[0] = v;
    flags[0] = 1;
}

/// The launcher takes the fields where the group stands.
#[allow(clippy::too_many_arguments)]
fn launch(
    pgas: &Pgas, x: &mut SymTensor<f32>, pes: &SymTensor<i32>, flags: &mut SymTensor<u64>, n: u32,
    me: u32,
) -> pgas::Result<()> {
    pass_on::launch(pgas, LaunchConfig::blocks(1, 1), x, pes, flags, n, me, 2.0)
}

pub fn check() {
    let names: Vec<&str> = pass_on::SPEC.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["x", "pes", "flags", "n", "me", "v"]);
    let whole: Vec<&str> = pass_whole::SPEC.params.iter().map(|p| p.name).collect();
    assert_eq!(
        whole,
        ["x", "ring_pes", "ring_flags", "ring_n", "ring_me", "v"]
    );
    assert!(pass_whole::SPEC.plain_source.contains(
        "pgas_fn_next_pe(ring_pes, ring_pes_len, ring_flags, ring_flags_len, ring_n, ring_me)"
    ));
    // The kernel's text, from its signature on, without the `#line` directives (the two
    // kernels stand on other lines) and with one name.
    let text = |spec: &pgas::kernel::KernelSpec| -> String {
        let s = spec.plain_source.replace(spec.cuda_name, "K");
        let from = s.find("__global__").expect("a kernel");
        s[from..]
            .lines()
            .filter(|l| !l.starts_with("#line"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        text(&pass_on::SPEC),
        text(&pass_on_listed::SPEC),
        "a group compiles to the kernel that lists its fields"
    );
}
