//! What a build has to do: which of the wanted kernels the disk cache holds, and the NVRTC
//! programs the others compile in, cut for the processes that compile on this node.

use std::path::PathBuf;

use super::batch::{self, Image};
use super::disk::DiskCache;
use super::helpers;
use super::key::Keyed;
use super::source::Source;
use super::toolchain::Toolchain;
use pgas_codegen::Prelude;

/// Kernels compiled together: their prelude (`None`: a raw kernel) and the kernels.
pub(crate) type Program = (Option<Prelude>, Vec<Keyed>);

/// A build's plan.
pub(crate) struct Plan {
    /// Kernels the disk cache holds, with their images.
    pub cached: Vec<(Keyed, Image)>,
    /// The programs to compile.
    pub programs: Vec<Program>,
    /// The helper executable and how many helper processes may compile beside this one (see
    /// [`super::helpers`]).
    pub helpers: Option<(PathBuf, usize)>,
}

impl Plan {
    /// The plan for the `pending` kernels (each with its want's index) on `arch`, with
    /// `node_pes` PEs on this node compiling the same kernels.
    pub(crate) fn new(
        tc: &Toolchain, disk: Option<&DiskCache>, arch: (u32, u32),
        pending: impl Iterator<Item = (usize, Source)>, node_pes: usize,
    ) -> Plan {
        // Each pending kernel, keyed once: from the disk cache, or into its prelude's group.
        let mut cached = Vec::new();
        let mut by_prelude: Vec<Program> = Vec::new();
        for (index, src) in pending {
            let kernel = tc.keyed(index, src, arch);
            if let Some(image) = disk.and_then(|d| batch::lookup(d, &kernel.key)) {
                cached.push((kernel, image));
                continue;
            }
            let prelude = batch::prelude_of(&kernel.src);
            match by_prelude
                .iter_mut()
                .find(|(p, _)| prelude.is_some() && *p == prelude)
            {
                Some((_, members)) => members.push(kernel),
                None => by_prelude.push((prelude, vec![kernel])),
            }
        }
        // Helper processes take programs from the same list (see `super::helpers`), so the
        // batches are cut for every compiling process of the node: its PEs and their helpers.
        // Looked for only when more than one kernel is to be compiled (one kernel is one
        // program, which the build compiles itself), and only with a disk cache (their results
        // travel through it).
        let pending: usize = by_prelude.iter().map(|(_, members)| members.len()).sum();
        let helpers = match disk {
            Some(_) if pending > 1 => helpers::helper_exe()
                .map(|exe| (exe, helpers::helper_count(node_pes)))
                .filter(|(_, count)| *count > 0),
            _ => None,
        };
        let compilers = node_pes.max(1) * (1 + helpers.as_ref().map_or(0, |(_, n)| *n));
        let mut programs: Vec<Program> = by_prelude
            .into_iter()
            .flat_map(|(prelude, members)| {
                batch::chunks(prelude, members, compilers, |k| {
                    // The kernel's own text: every member carries the same prelude.
                    let shared = prelude.map_or(0, |p| p.text().len());
                    k.src.text.len().saturating_sub(shared)
                })
                .into_iter()
                .map(move |c| (prelude, c))
            })
            .collect();
        // The slow programs first (the build and its helpers start at the top of the list),
        // the others in the order they were wanted.
        programs.sort_by_key(|(_, members)| !members.iter().any(|k| batch::starts_first(&k.src)));
        Plan {
            cached,
            programs,
            helpers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, prelude: &str) -> Source {
        Source {
            display: name.to_owned(),
            cuda_name: name.to_owned(),
            text: format!(
                "#define PGAS_KERNEL_NAME {name}\n{prelude}extern \"C\" __global__ void PGAS_KERNEL_NAME() {{}}\n"
            ),
            batchable: true,
        }
    }

    #[test]
    fn collective_programs_come_first_and_the_rest_keep_their_order() {
        let tc = Toolchain::discover()
            .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
        let (p2p, full) = (pgas_codegen::PRELUDE_P2P, pgas_codegen::PRELUDE);
        let wanted = [
            source("plan_a", p2p),
            source("plan_b", full),
            source("plan_c", p2p),
            source("plan_d", full),
        ];
        let plan = Plan::new(&tc, None, (9, 0), wanted.into_iter().enumerate(), 1);
        let names: Vec<Vec<&str>> = plan
            .programs
            .iter()
            .map(|(_, members)| members.iter().map(|k| k.src.cuda_name.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            [vec!["plan_b"], vec!["plan_d"], vec!["plan_a", "plan_c"]]
        );
        assert!(plan.cached.is_empty() && plan.helpers.is_none());
    }
}
