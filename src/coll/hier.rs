//! Collectives over a team that spans several nodes: peer loads and stores inside each node,
//! NVSHMEM's collectives across them. A [`Comm`] over `Team::WORLD` whose PEs form groups of
//! consecutive PEs, each reaching exactly its own group by loads and stores, keeps two
//! communicators beside its own: `node` (its group) and `cross` (the PEs with its place in the
//! other groups). The all-reduce is a reduce-scatter in the node, an all-reduce across nodes and
//! an all-gather in the node; the other collectives split the same way (`docs/coll.md`, "Several
//! nodes"). NVSHMEM's collectives run eagerly only, so these do too: a stream being captured is
//! refused.

use cudarc::driver::CudaStream;

use super::comm::{refuse_capture, Algorithm, Comm, Hier};
use super::elem::AllReduceElem;
use super::region::Region;
use super::scratch::Scratch;
use crate::{Pgas, ReduceOp, Result, SymRegion, SymTensor, Team, TeamConfig};

impl Hier {
    /// The two levels of `Team::WORLD` where its PEs form groups as the module documentation
    /// says, else `None`. Collective over every PE: each says which group it reaches (one
    /// `fcollect`), so every PE takes the same verdict, and where all agree on groups of `g`
    /// (at least 2 PEs, at least 2 groups) they split the world into them
    /// ([`Team::split_2d`]) and make a communicator over each level.
    /// `probe`: any symmetric buffer (the communicator's flags), to ask reachability with.
    pub(super) fn new(pgas: &Pgas, probe: &SymTensor<u64>) -> Result<Option<Hier>> {
        let n = pgas.n_pes();
        if n < 4 {
            // Two groups of at least two PEs take four.
            return Ok(None);
        }
        let me = pgas.my_pe();
        let mut reached = Vec::with_capacity(n);
        for pe in 0..n {
            if pgas.peer_reachable(probe, pe)? {
                reached.push(pe);
            }
        }
        // This PE's group: the PEs it reaches, if they are the `g` consecutive ones of its
        // aligned block of `g` (else 0: no hierarchy).
        let g = reached.len();
        let start = me / g * g;
        let aligned = n.is_multiple_of(g) && reached.iter().copied().eq(start..start + g);
        let mine = u64::from(aligned) * g as u64;
        let own = pgas.alloc_from(&[mine])?;
        let all = pgas.alloc::<u64>(n)?;
        pgas.fcollect(Team::WORLD, &all, &own)?;
        let all = all.to_vec()?;
        let g = all[0] as usize;
        if g < 2 || g == n || all.iter().any(|&v| v as usize != g) {
            return Ok(None);
        }
        let config = TeamConfig::default();
        let (row, column) = Team::WORLD.split_2d(pgas, g, &config, &config)?;
        Ok(Some(Hier {
            pgas: pgas.clone(),
            node: Comm::new(pgas, row)?,
            cross: Comm::new(pgas, column)?,
            g,
        }))
    }

    /// PEs a group.
    pub(super) fn group(&self) -> usize {
        self.g
    }

    /// All-reduce of `src` into `dst` (`len` a multiple of the group size): reduce-scatter in
    /// the node, all-reduce across nodes, all-gather in the node.
    pub(super) fn all_reduce<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &Region<T>, op: ReduceOp,
        scratch: &mut Scratch,
    ) -> Result<()> {
        refuse_capture(
            stream,
            "the hierarchical all-reduce (NVSHMEM's across nodes)",
        )?;
        let m = src.len() / self.g;
        let (mut part, mut sum) = scratch.regions::<T>(stream, m, m)?;
        self.node
            .reduce_scatter(&mut part, src, op, Algorithm::Auto.on(stream))?;
        self.cross
            .all_reduce(&mut sum, &part, op, Algorithm::Nvshmem.on(stream))?;
        self.node
            .all_gather(dst, &sum, Algorithm::Auto.on(stream))?;
        Ok(())
    }

    /// All-gather of `src` into `dst`: in the node, then across nodes into the scratch, then
    /// into `dst`. NVSHMEM's collectives over a split team get 16-byte aligned buffers only:
    /// given `dst` at an odd element, its on-stream kernels stopped on a misaligned address
    /// (the differential test on 4 PEs as two nodes).
    pub(super) fn all_gather<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        refuse_capture(
            stream,
            "the hierarchical all-gather (NVSHMEM's across nodes)",
        )?;
        let (mut node_part, mut gathered) =
            scratch.regions::<T>(stream, self.g * src.len(), dst.len())?;
        self.node
            .all_gather(&mut node_part, src, Algorithm::Auto.on(stream))?;
        self.cross
            .all_gather(&mut gathered, &node_part, Algorithm::Auto.on(stream))?;
        self.pgas
            .put_on(stream, &*dst, &gathered, self.pgas.my_pe())
    }

    /// Reduce-scatter of `src` into `dst`: across nodes with chunks of `g` times `dst` (from an
    /// aligned copy of `src` in the scratch, as `all_gather` says why), then in the node.
    pub(super) fn reduce_scatter<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        op: ReduceOp, scratch: &mut Scratch,
    ) -> Result<()> {
        refuse_capture(
            stream,
            "the hierarchical reduce-scatter (NVSHMEM's across nodes)",
        )?;
        let (copy, mut node_part) = scratch.regions::<T>(stream, src.len(), self.g * dst.len())?;
        self.pgas.put_on(stream, &copy, src, self.pgas.my_pe())?;
        self.cross
            .reduce_scatter(&mut node_part, &copy, op, Algorithm::Auto.on(stream))?;
        self.node
            .reduce_scatter(dst, &node_part, op, Algorithm::Auto.on(stream))?;
        Ok(())
    }
}

impl Hier {
    /// All-to-all of `src` into `dst` (one chunk per PE of the world, chunk `q` of `src` for
    /// PE `q`): this node's chunks by the node communicator (peer loads or stores), then, after
    /// a world barrier (every PE is in the call, so every `dst` is free), one NVSHMEM put
    /// (`nvshmemx_putmem_nbi_on_stream`, which the proxy carries) of each chunk for a PE of
    /// another node, and a world barrier, which completes the puts and tells every PE its
    /// chunks have landed. Both buffers symmetric and apart (the caller checked).
    pub(super) fn all_to_all<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        refuse_capture(
            stream,
            "the hierarchical all-to-all (NVSHMEM's puts across nodes)",
        )?;
        let n = self.pgas.n_pes();
        let me = self.pgas.my_pe();
        let c = src.len() / n;
        if c == 0 {
            // The same length on every PE: every PE returns here.
            return Ok(());
        }
        let first = me / self.g * self.g;
        let (dst, src) = (Region::of(dst), Region::of(src));
        let mut in_node = Region::within(&dst, first * c, self.g * c);
        let from_node = Region::within(&src, first * c, self.g * c);
        self.node
            .all_to_all(&mut in_node, &from_node, Algorithm::Auto.on(stream))?;
        Team::WORLD.barrier_on(&self.pgas, stream)?;
        for q in (0..n).filter(|q| q / self.g != me / self.g) {
            let to = Region::within(&dst, me * c, c);
            let from = Region::within(&src, q * c, c);
            self.pgas.put_nbi_on(stream, &to, &from, q)?;
        }
        Team::WORLD.barrier_on(&self.pgas, stream)
    }
}

impl Drop for Hier {
    /// Destroys the two teams (collective, as the communicator's drop is: every PE drops its
    /// communicators in the same order). The communicators over them are refused after that,
    /// and go with this.
    fn drop(&mut self) {
        for team in [self.node.team, self.cross.team] {
            // A failure here has no caller to tell; the team then stays until finalize.
            let _ = team.destroy(&self.pgas);
        }
    }
}
