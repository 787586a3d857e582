//! The checker's state ([`Checker`]), the entry point [`check_fn`], what a check finds out
//! ([`FnInfo`]), and the small predicates on the IR several concerns share.

use crate::error::{Errors, Sp};
use crate::ir::*;
use crate::prelude::Prelude;
use crate::types::{Scalar, Ty};
use std::collections::{BTreeSet, HashMap, HashSet};

/// A device function's signature, as callers see it.
#[derive(Clone, Debug)]
pub struct FnSig {
    pub params: Vec<Ty>,
    pub ret: Ty,
}

/// What checking one function found out.
#[derive(Debug, Default)]
pub struct FnInfo {
    /// The NVSHMEM headers its own calls need (a barrier or collective also means a
    /// collective launch).
    pub prelude: Prelude,
    /// Device functions it calls directly.
    pub calls: BTreeSet<String>,
    /// Calls a warp-wide tensor-core instruction (scope `FullWarp`) directly: the kernel must
    /// run whole warps.
    pub full_warp: bool,
    /// Uses a row of the tile or tensor-core groups directly: the source needs their support
    /// code.
    pub tensor: bool,
    /// Calls a warpgroup-wide instruction (scope `Warpgroup`, `wgmma_*`) directly: the kernel
    /// must run whole warpgroups.
    pub warpgroup: bool,
    /// Uses a Hopper row (mbarriers, TMA, wgmma) directly: the source carries their support
    /// code and compiles for sm_90a.
    pub sm90: bool,
    /// Calls a collective over peer memory (`team_all_reduce_block` ...) directly: the source
    /// carries the LL protocol's support code.
    pub ll: bool,
    /// Uses a multicast row (`multimem_*`, `has_multicast`) directly: the source carries their
    /// support code and compiles for sm_90a.
    pub multimem: bool,
    /// Declares a local array (`[0f32; 8]`) directly: the checked variant carries the check of
    /// its indices.
    pub local_arrays: bool,
    /// Where it first calls `setmaxnreg_inc`/`_dec` directly: the kernel must declare its block
    /// (`max_threads`).
    pub setmaxnreg: Option<Sp>,
}

/// Where an expression sits, which decides what it may be.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctx {
    /// Inside a larger expression.
    Nested,
    /// A statement, `let` initializer, assignment source, `return` value or block tail: an
    /// `if`/block with statements may produce the value here.
    Stmt,
    /// An intrinsic argument: element addresses `&x[i]` are allowed.
    Arg,
}

/// Checks one function.
pub struct Checker<'a> {
    pub(super) sigs: &'a HashMap<String, FnSig>,
    /// Unknown callees are not errors (checking a `#[pgas_device]` alone, before the kernel
    /// that uses it supplies its callees).
    pub(super) lenient: bool,
    pub(super) errors: Errors,
    pub(super) slots: Vec<Slot>,
    pub(super) locals: Vec<Local>,
    pub(super) scopes: Vec<Vec<usize>>,
    pub(super) used_c_names: HashSet<String>,
    pub(super) read: HashSet<String>,
    pub(super) ret: Ty,
    pub(super) loop_depth: usize,
    pub(super) info: FnInfo,
    /// A lenient check met a callee it does not know, so its types are incomplete.
    pub(super) incomplete: bool,
    /// C names of the variables an index of a fragment or local array depends on: loops over
    /// them unroll.
    pub(super) frag_index_vars: HashSet<String>,
    /// For each local, the C names of the variables its initializer reads (transitively).
    pub(super) var_deps: HashMap<String, Vec<String>>,
}

/// Check `f` against the signatures of the device functions it may call. On success the IR
/// is fully typed and named.
pub fn check_fn(
    f: &mut Function, sigs: &HashMap<String, FnSig>, lenient: bool,
) -> Result<FnInfo, Errors> {
    let mut c = Checker {
        sigs,
        lenient,
        errors: Errors::default(),
        slots: Vec::new(),
        locals: Vec::new(),
        scopes: vec![Vec::new()],
        used_c_names: HashSet::new(),
        read: HashSet::new(),
        ret: f.ret.map(|(t, _)| t).unwrap_or(Ty::Unit),
        loop_depth: 0,
        info: FnInfo::default(),
        incomplete: false,
        frag_index_vars: HashSet::new(),
        var_deps: HashMap::new(),
    };
    let mut seen = HashSet::new();
    for p in &mut f.params {
        if !seen.insert(p.name.clone()) {
            c.errors
                .push(p.span, format!("parameter `{}` is declared twice", p.name));
        }
        if f.is_kernel && matches!(p.name.as_str(), "pgas" | "cfg" | "stream") {
            c.errors.push(
                p.span,
                format!(
                    "`{}` is the name of a launcher argument; rename this parameter",
                    p.name
                ),
            );
        }
        // A borrowed local array is indexed here: the checked variant's check comes along.
        c.info.local_arrays |= matches!(p.ty, Ty::Array(_));
        p.c_name = c.declare(&p.name, p.ty, false, true, p.comptime);
    }
    let ret = c.ret;
    let body_ty = c.block(&mut f.body, Some(ret), Ctx::Stmt);
    if ret != Ty::Unit {
        let tail_span = f.body.tail.as_ref().map(|t| t.span).unwrap_or(f.body.span);
        if f.body.tail.is_none() && !ends_in_return(&f.body) {
            c.errors.push(
                tail_span,
                format!(
                    "this function must return a `{}`: end it with a value or a `return`",
                    c.show(ret)
                ),
            );
        } else if !c.unify(body_ty, ret) {
            let found = c.show(body_ty);
            c.errors.push(
                tail_span,
                format!(
                    "mismatched types: expected `{}`, found `{found}`",
                    c.show(ret)
                ),
            );
        }
    } else if let Some(t) = &f.body.tail {
        let t_ty = t.ty;
        if !matches!(c.resolve(t_ty), Ty::Unit | Ty::Never | Ty::Error) {
            let found = c.show(t_ty);
            c.errors.push(t.span, format!("a kernel returns nothing, but this block ends in a value of type `{found}`; add `;`"));
        }
    }
    let read = std::mem::take(&mut c.read);
    for p in &mut f.params {
        p.read = read.contains(&p.c_name);
    }
    c.finish_block(&mut f.body, &read);
    // Without its callees' signatures a lenient check cannot judge types; the kernel that
    // supplies them reports any error.
    if c.errors.is_empty() || c.incomplete {
        Ok(c.info)
    } else {
        Err(c.errors)
    }
}

pub(super) fn ends_in_return(b: &Block) -> bool {
    matches!(
        b.stmts.last(),
        Some(Stmt::Expr(Expr {
            kind: ExprKind::Return(_),
            ..
        }))
    )
}

pub(super) fn is_simple_block(b: &Block) -> bool {
    b.stmts.is_empty() && b.tail.as_ref().is_some_and(|t| is_simple_value(t))
}

/// Whether an expression can be printed as one C expression (a ternary for `if`).
pub fn is_simple_value(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::If {
            then,
            els: Some(els),
            ..
        } => is_simple_block(then) && is_simple_value(els),
        ExprKind::Block(b) => is_simple_block(b),
        ExprKind::If { .. }
        | ExprKind::For { .. }
        | ExprKind::While { .. }
        | ExprKind::Loop(_)
        | ExprKind::Return(_)
        | ExprKind::Break
        | ExprKind::Continue
        | ExprKind::Assert { .. } => false,
        _ => true,
    }
}

/// The name an indexed base spells (a local array is always a variable).
pub(super) fn var_name(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Var { name, .. } => name.clone(),
        _ => "array".into(),
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Slot {
    Int,
    Float,
    Bound(Scalar),
    Link(u32),
}

#[derive(Clone, Debug)]
pub(super) struct Local {
    pub(super) name: String,
    pub(super) ty: Ty,
    pub(super) mutable: bool,
    pub(super) is_param: bool,
    pub(super) c_name: String,
    pub(super) comptime: bool,
}
