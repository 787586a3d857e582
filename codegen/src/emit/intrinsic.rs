//! A call of an intrinsic row: its arguments (with the checked variant's checks), its count,
//! and its template or NVSHMEM wrapper.

use super::emitter::Emitter;
use crate::intrinsics::{self, Arg, Count, Intrinsic, Scope};
use crate::ir::*;
use crate::nvcall;
use crate::template::expand_template;
use crate::types::Scalar;

impl Emitter {
    /// Expand an intrinsic row's template.
    pub(super) fn intrinsic(
        &mut self, row: &Intrinsic, elem: Option<Scalar>, args: &[Expr], line: usize,
    ) -> String {
        let mut texts: Vec<String> = Vec::with_capacity(args.len());
        let mut lens: Vec<String> = Vec::with_capacity(args.len());
        let mut op = String::new();
        for (i, a) in args.iter().enumerate() {
            let kind = row.args.get(i).map(|(_, k)| *k);
            let (t, l) = self.arg(kind, a, args, line, &mut op);
            texts.push(t);
            lens.push(l);
        }
        let len = |i: usize| lens.get(i).cloned().unwrap_or_default();
        let team_size = || {
            let team = texts.first().cloned().unwrap_or_default();
            format!("(unsigned long long)nvshmem_team_n_pes({team})")
        };
        let count = match row.count {
            Count::None => String::new(),
            Count::Min(a, b) => format!("pgas_min_len({}, {})", len(a), len(b)),
            Count::ReduceScatter => {
                format!("pgas_min_len({}, {} / {})", len(1), len(2), team_size())
            }
            Count::AllGather => format!("pgas_min_len({}, {} / {})", len(2), len(1), team_size()),
            Count::AllToAll => format!("(pgas_min_len({}, {}) / {})", len(1), len(2), team_size()),
        };
        let t_text = elem
            .and_then(|s| intrinsics::type_text(row, s))
            .unwrap_or("");
        let c_text = elem.map(|s| s.c_type()).unwrap_or("");
        let line_text = line.to_string();
        let call = if nvcall::wraps(row) {
            // Through the row's wrapper (nvcall.rs), so the source also compiles link-time.
            let w = nvcall::wrapper(row, elem, &op);
            let values: Vec<String> = w
                .keys
                .iter()
                .map(|key| match key.split_once('.') {
                    _ if key == "n" => count.clone(),
                    _ if key == "line" => line_text.clone(),
                    Some((i, "len")) => i
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| lens.get(i).cloned())
                        .unwrap_or_default(),
                    _ => key
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| texts.get(i).cloned())
                        .unwrap_or_default(),
                })
                .collect();
            let call = format!("{}({})", w.name, values.join(", "));
            self.wrappers
                .entry(w.name.clone())
                .or_insert_with(|| w.inline_definition());
            call
        } else {
            expand_template(
                row.cuda, &texts, &lens, &count, t_text, c_text, &op, &line_text,
            )
        };
        if self.checked && matches!(row.scope, Scope::FullWarp | Scope::Warpgroup) {
            format!("(pgas_check_full_warp({line}), {call})")
        } else if self.checked && row.group == intrinsics::Group::PeerCollective {
            // The scratch must hold `device_scratch_len` words from an even index on.
            let scratch = args.get(3).and_then(|a| match &a.kind {
                ExprKind::ElemRef { base, index, .. } => {
                    let (bp, bl) = self.buf(base);
                    Some((bp, self.expr(index), bl))
                }
                _ => None,
            });
            match scratch {
                Some((bp, i, bl)) => format!(
                    "(pgas_check_ll_scratch({bp}, {i}, {bl}, {}, ({count}) * sizeof({c_text}), {line}), {call})",
                    texts.first().cloned().unwrap_or_default()
                ),
                None => call,
            }
        } else {
            call
        }
    }

    /// One argument of an intrinsic call of kind `kind` as (text, length text), with the
    /// checked variant's check where the kind has one; a reduction's operator goes to `op`.
    fn arg(
        &mut self, kind: Option<Arg>, a: &Expr, args: &[Expr], line: usize, op: &mut String,
    ) -> (String, String) {
        match kind {
            Some(Arg::RemoteDst | Arg::SymSrc | Arg::AnySrc | Arg::AnyDst | Arg::AnyBuf) => {
                self.buf(a)
            }
            Some(
                kind @ (Arg::Pe
                | Arg::TeamPe(_)
                | Arg::ClusterRank
                | Arg::ClusterMask
                | Arg::Col(_)),
            ) => (self.checked_number(kind, a, args, line), String::new()),
            // The helpers take fragments by reference: pass the lvalue `acc[i]`.
            Some(Arg::Frag { .. }) => match &a.kind {
                ExprKind::ElemRef { base, index, .. } => {
                    (self.index(base, index, line), String::new())
                }
                _ => (self.expr(a), String::new()),
            },
            Some(
                kind @ (Arg::Bytes16 { .. }
                | Arg::TmaDst(_)
                | Arg::TmaSrc(_)
                | Arg::WgTile { .. }
                | Arg::WgTileMn { .. }
                | Arg::WgAcc { .. }
                | Arg::AccIn { .. }),
            ) => (self.elem_address(kind, a, args, line), String::new()),
            Some(Arg::ReduceOp) => {
                *op = match &a.kind {
                    ExprKind::Enum(en, v) => en
                        .variants()
                        .iter()
                        .find(|(n, _)| n == v)
                        .map(|(_, c)| c.to_string())
                        .unwrap_or_default(),
                    // The kernel's comptime reduction (the checker allows it only where the
                    // template says `pgas_op_{op}`): the prelude's type for its code.
                    ExprKind::Var { name, .. } => format!("of<(int)(PGAS_CT_{name})>"),
                    _ => String::new(),
                };
                (String::new(), String::new())
            }
            _ => (self.expr(a), String::new()),
        }
    }

    /// A PE, cluster rank or mask, or column argument: its value, in the checked variant
    /// through the check of its range.
    fn checked_number(&mut self, kind: Arg, a: &Expr, args: &[Expr], line: usize) -> String {
        let x = self.expr(a);
        if !self.checked {
            return match kind {
                Arg::Pe | Arg::TeamPe(_) => self.int_pe(a, x),
                _ => x,
            };
        }
        match kind {
            Arg::Pe => format!("pgas_check_pe((long long)({x}), {line})"),
            Arg::TeamPe(team) => {
                let team = args.get(team).map(|t| self.expr(t)).unwrap_or_default();
                format!("pgas_check_team_pe((long long)({x}), {team}, {line})")
            }
            Arg::ClusterRank => format!("pgas_check_cluster_rank({x}, {line})"),
            Arg::ClusterMask => format!("pgas_check_cluster_mask({x}, {line})"),
            Arg::Col(ld) => {
                let ld = args.get(ld).map(|t| self.expr(t)).unwrap_or_default();
                format!("pgas_check_col({x}, {ld}, {line})")
            }
            _ => unreachable!("checked_number takes PEs, cluster ranks and masks, and columns"),
        }
    }

    /// An element address `&x[i]` passed as a 16-byte address, a TMA box, a wgmma tile or
    /// the first of `n` wgmma accumulators (which the helpers take by pointer): the pointer,
    /// in the checked variant through the check that the range it covers is in bounds.
    fn elem_address(&mut self, kind: Arg, a: &Expr, args: &[Expr], line: usize) -> String {
        let ExprKind::ElemRef { base, index, .. } = &a.kind else {
            return self.expr(a);
        };
        let (bp, bl) = self.buf(base);
        let i = self.expr(index);
        match kind {
            Arg::WgAcc { n } | Arg::AccIn { n } if self.checked => {
                format!("&{bp}[pgas_check_range({i}, ({i}) + {n}, {bl}, {line})]")
            }
            Arg::WgAcc { .. } | Arg::AccIn { .. } => format!("&{bp}[{i}]"),
            _ if !self.checked => format!("({bp} + {i})"),
            Arg::Bytes16 { .. } => format!("pgas_check_16({bp}, {i}, {bl}, {line})"),
            Arg::TmaDst(map) | Arg::TmaSrc(map) => {
                let map = args.get(map).map(|m| self.expr(m)).unwrap_or_default();
                format!("pgas_check_tma_dst({bp}, {i}, {bl}, {map}_box, {line})")
            }
            Arg::WgTile { rows } => {
                format!("pgas_check_wgmma_tile({bp}, {i}, {bl}, {rows}, {line})")
            }
            Arg::WgTileMn { n, chunk } => {
                let chunk = args.get(chunk).map(|c| self.expr(c)).unwrap_or_default();
                format!("pgas_check_wgmma_tile_mn({bp}, {i}, {bl}, {n}, {chunk}, {line})")
            }
            _ => unreachable!("elem_address takes element-address kinds only"),
        }
    }
}

/// `x` without one pair of enclosing parentheses, where they enclose all of it (statement
/// positions need none).
pub(super) fn bare(x: &str) -> &str {
    let Some(inner) = x.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        return x;
    };
    let mut depth = 0i32;
    for ch in inner.chars() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return x;
                }
            }
            _ => {}
        }
    }
    if depth == 0 {
        inner
    } else {
        x
    }
}
