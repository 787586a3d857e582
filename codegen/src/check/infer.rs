//! Inference variables: unsuffixed literals get a variable that unifies with the first
//! concrete type it meets, or defaults to `i32`/`f64` as in Rust. Kept apart because every
//! other check asks these questions (`resolve`, `unify`, `is_int`) and none needs to know how
//! the answer is stored.

use super::checker::{Checker, Slot};
use crate::types::{ArrElem, ArrayTy, Scalar, Ty};

impl Checker<'_> {
    pub(super) fn fresh(&mut self, slot: Slot) -> Ty {
        self.slots.push(slot);
        Ty::Var(self.slots.len() as u32 - 1)
    }

    pub(super) fn root(&self, mut v: u32) -> u32 {
        while let Slot::Link(n) = self.slots[v as usize] {
            v = n;
        }
        v
    }

    pub(super) fn resolve(&self, t: Ty) -> Ty {
        match t {
            Ty::Var(v) => {
                let r = self.root(v);
                match self.slots[r as usize] {
                    Slot::Bound(s) => Ty::Scalar(s),
                    _ => Ty::Var(r),
                }
            }
            Ty::Array(a) => Ty::Array(ArrayTy {
                elem: match a.elem {
                    ArrElem::Var(v) => match self.resolve(Ty::Var(v)) {
                        Ty::Scalar(s) => ArrElem::Scalar(s),
                        Ty::Var(r) => ArrElem::Var(r),
                        _ => a.elem,
                    },
                    e => e,
                },
                ..a
            }),
            other => other,
        }
    }

    /// Make `a` and `b` the same type if Rust would; false if they cannot be.
    pub(super) fn unify(&mut self, a: Ty, b: Ty) -> bool {
        let (a, b) = (self.resolve(a), self.resolve(b));
        match (a, b) {
            (Ty::Error, _) | (_, Ty::Error) | (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Var(x), Ty::Var(y)) => {
                if x == y {
                    return true;
                }
                match (self.slots[x as usize], self.slots[y as usize]) {
                    (Slot::Int, Slot::Int) | (Slot::Float, Slot::Float) => {
                        self.slots[x as usize] = Slot::Link(y);
                        true
                    }
                    _ => false,
                }
            }
            (Ty::Var(x), Ty::Scalar(s)) | (Ty::Scalar(s), Ty::Var(x)) => {
                let ok = match self.slots[x as usize] {
                    Slot::Int => s.is_int(),
                    // FP8 has no literals (`0.5f32 as e4m3` makes one).
                    Slot::Float => s.is_float() && !s.is_fp8(),
                    _ => false,
                };
                if ok {
                    self.slots[x as usize] = Slot::Bound(s);
                }
                ok
            }
            (a, b) => a == b,
        }
    }

    /// Resolve `t`, defaulting an unconstrained literal type as Rust does.
    pub(super) fn concrete(&mut self, t: Ty) -> Ty {
        match self.resolve(t) {
            Ty::Var(v) => {
                let s = match self.slots[v as usize] {
                    Slot::Float => Scalar::F64,
                    _ => Scalar::I32,
                };
                self.slots[v as usize] = Slot::Bound(s);
                Ty::Scalar(s)
            }
            Ty::Array(a) => match a.elem {
                ArrElem::Var(v) => match self.concrete(Ty::Var(v)) {
                    Ty::Scalar(s) => Ty::Array(ArrayTy {
                        elem: ArrElem::Scalar(s),
                        ..a
                    }),
                    _ => Ty::Array(a),
                },
                ArrElem::Scalar(_) | ArrElem::Vec16(_) => Ty::Array(a),
            },
            other => other,
        }
    }

    /// A local array's element type as messages write it.
    pub(super) fn show_elem(&self, e: ArrElem) -> String {
        match e {
            ArrElem::Scalar(s) => s.to_string(),
            ArrElem::Var(v) => self.show(Ty::Var(v)),
            ArrElem::Vec16(s) => format!("Vec16<{s}>"),
        }
    }

    pub(super) fn show(&self, t: Ty) -> String {
        match self.resolve(t) {
            Ty::Scalar(s) => s.to_string(),
            Ty::Var(v) => match self.slots[v as usize] {
                Slot::Float => "float".into(),
                _ => "integer".into(),
            },
            Ty::Buf(b) => b.to_string(),
            Ty::ElemRef(b) => format!("element address of {b}"),
            Ty::FragArray(f) => format!("array of {f}s"),
            Ty::Frag(f) => f.to_string(),
            Ty::Vec16(s) => format!("Vec16<{s}>"),
            Ty::Array(a) => {
                let elem = self.show_elem(a.elem);
                match a.len {
                    Some(n) => format!("[{elem}; {n}]"),
                    None => format!("[{elem}; N]"),
                }
            }
            Ty::Team => "Team".into(),
            Ty::TensorMap(s) => format!("&TensorMap<{s}>"),
            Ty::TensorMapMut(s) => format!("&mut TensorMap<{s}>"),
            Ty::Enum(e) => e.name().into(),
            Ty::Unit => "()".into(),
            Ty::Never => "!".into(),
            Ty::Error => "{error}".into(),
        }
    }

    pub(super) fn is_int(&self, t: Ty) -> bool {
        match self.resolve(t) {
            Ty::Scalar(s) => s.is_int(),
            Ty::Var(v) => matches!(self.slots[v as usize], Slot::Int),
            Ty::Error | Ty::Never => true,
            _ => false,
        }
    }

    pub(super) fn is_numeric(&self, t: Ty) -> bool {
        match self.resolve(t) {
            Ty::Scalar(s) => s != Scalar::Bool,
            Ty::Var(_) | Ty::Error | Ty::Never => true,
            _ => false,
        }
    }
}
