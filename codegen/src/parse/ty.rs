//! Types as kernels write them: parameter types and scalar type names.

use super::lowerer::Lowerer;
use crate::error::Sp;
use crate::intrinsics;
use crate::types::{ArrElem, ArrayTy, BufKind, BufTy, EnumTy, FragKind, FragTy, Scalar, Ty};

/// Why a local array type `[T; N]` cannot be a parameter or a return type.
pub const LOCAL_ARRAY_ACROSS_CALLS: &str = "local arrays `[T; N]` live in the registers of the function that declares them and are not copied into or out of a function; a #[pgas_device] function borrows one as a slice, `acc: &mut [f32]` (fragments: `&mut [FragC<f32>]`), and the caller passes `&mut acc`";

/// Why a kernel cannot take a register array.
const KERNEL_SLICE: &str = "a kernel's parameters come from the host, and registers do not; a slice `&[T]` is how a #[pgas_device] function borrows its caller's local or fragment array. A kernel takes host memory as `&CudaSlice<T>` or `&SymTensor<T>`";

/// Whether fragments of `kind` may hold `elem`: the types its declaring intrinsic takes.
fn holds(kind: FragKind, elem: Scalar) -> bool {
    intrinsics::free(kind.decl_name()).is_some_and(|row| intrinsics::type_text(row, elem).is_some())
}

/// Whether `ty` is an array type `[T; N]`, or a reference to one.
pub fn is_array_type(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Array(_) => true,
        syn::Type::Reference(r) => is_array_type(&r.elem),
        syn::Type::Paren(p) => is_array_type(&p.elem),
        syn::Type::Group(g) => is_array_type(&g.elem),
        _ => false,
    }
}

const PARAM_TYPES: &str = "kernel parameters are `&SymTensor<T>`, `&mut SymTensor<T>`, `&CudaSlice<T>`, `&mut CudaSlice<T>`, `&TensorMap<T>`, a scalar type, or `Team`";

impl Lowerer<'_> {
    /// A parameter's type, or `None` (with an error) where the function cannot take it: a
    /// kernel what the host passes, a device function also its caller's register arrays.
    pub fn lower_param_type(&mut self, ty: &syn::Type, is_kernel: bool) -> Option<Ty> {
        if let syn::Type::Reference(r) = ty {
            if let syn::Type::Slice(sl) = &*r.elem {
                if is_kernel {
                    self.errors.push(Sp::of(&ty), KERNEL_SLICE);
                    return None;
                }
                return self.register_slice(&sl.elem, r.mutability.is_some());
            }
        }
        if is_array_type(ty) {
            self.errors.push(Sp::of(&ty), LOCAL_ARRAY_ACROSS_CALLS);
            return None;
        }
        match ty {
            syn::Type::Reference(r) => {
                if r.lifetime.is_some() {
                    self.errors.push(
                        Sp::of(&r),
                        "lifetimes are not needed on kernel parameters; remove `'a`",
                    );
                    return None;
                }
                let mutable = r.mutability.is_some();
                if let syn::Type::Path(tp) = &*r.elem {
                    if tp.qself.is_none() {
                        if let Some(seg) = tp.path.segments.last() {
                            if seg.ident == "TensorMap" {
                                return self.tensor_map_param(seg, mutable);
                            }
                            let kind = match seg.ident.to_string().as_str() {
                                "SymTensor" => Some(BufKind::Sym),
                                "CudaSlice" => Some(BufKind::Local),
                                _ => None,
                            };
                            if let Some(kind) = kind {
                                let elem = match &seg.arguments {
                                    syn::PathArguments::AngleBracketed(ab)
                                        if ab.args.len() == 1 =>
                                    {
                                        match &ab.args[0] {
                                            syn::GenericArgument::Type(t) => scalar_of_type(t),
                                            _ => None,
                                        }
                                    }
                                    _ => None,
                                };
                                return match elem {
                                    Some(elem) => Some(Ty::Buf(BufTy {
                                        kind,
                                        elem,
                                        mutable,
                                    })),
                                    None => {
                                        self.errors.push(
                                            Sp::of(&seg.arguments),
                                            format!(
                                            "`{}` takes one scalar element type, e.g. `{}<f32>`",
                                            seg.ident, seg.ident
                                        ),
                                        );
                                        None
                                    }
                                };
                            }
                        }
                    }
                }
                self.errors.push(Sp::of(&ty), PARAM_TYPES);
                None
            }
            _ => {
                if let Some(s) = scalar_of_type(ty) {
                    return Some(Ty::Scalar(s));
                }
                if let syn::Type::Path(tp) = ty {
                    if let Some(seg) = tp.path.segments.last() {
                        if seg.ident == "Team" && seg.arguments.is_empty() {
                            return Some(Ty::Team);
                        }
                        // A reduction: a kernel's `#[comptime]` parameter (item.rs checks),
                        // or a device function's, passed on from one.
                        if seg.ident == "ReduceOp" && seg.arguments.is_empty() {
                            return Some(Ty::Enum(EnumTy::ReduceOp));
                        }
                        if let Some(s) = vec16_of_type(ty) {
                            if !is_kernel {
                                return Some(Ty::Vec16(s));
                            }
                            self.errors.push(
                                Sp::of(&ty),
                                "a kernel's parameters come from the host: pass the buffer and \
                                 `load_vec16` in the kernel (a `#[pgas_device]` function may take \
                                 a `Vec16<T>`)",
                            );
                            return None;
                        }
                        if seg.ident == "SymTensor" || seg.ident == "CudaSlice" {
                            self.errors.push(
                                Sp::of(&ty),
                                format!(
                                    "take the buffer by reference: `&{0}<T>` or `&mut {0}<T>`",
                                    seg.ident
                                ),
                            );
                            return None;
                        }
                    }
                }
                self.errors.push(Sp::of(&ty), PARAM_TYPES);
                None
            }
        }
    }

    /// A device function's borrow of a register array, `&[T]` / `&mut [T]`: of a scalar `T` or a
    /// `Vec16<T>` a local array (`let mut acc = [0f32; 8]`, `let v = [load_vec16(&x[i]); 2]`), of
    /// `FragA<T>` / `FragB<T>` / `FragC<f32>` a fragment array (`frag_a::<T, N>()` ...). Its length
    /// is the caller's array's.
    fn register_slice(&mut self, elem: &syn::Type, mutable: bool) -> Option<Ty> {
        let array = |elem| {
            Some(Ty::Array(ArrayTy {
                elem,
                len: None,
                mutable,
            }))
        };
        if let Some(s) = scalar_of_type(elem) {
            return array(ArrElem::Scalar(s));
        }
        if let Some(s) = vec16_of_type(elem) {
            return array(ArrElem::Vec16(s));
        }
        match wrapped_scalar(elem) {
            Some((name, s)) => match FragKind::ALL
                .into_iter()
                .find(|k| name == k.param_name() && holds(*k, s))
            {
                Some(kind) => Some(Ty::FragArray(FragTy {
                    kind,
                    elem: s,
                    mutable,
                })),
                None => self.slice_error(elem),
            },
            None => self.slice_error(elem),
        }
    }

    fn slice_error(&mut self, elem: &syn::Type) -> Option<Ty> {
        self.errors.push(Sp::of(&elem), "a register array parameter is a slice of a scalar type (`&mut [f32]`, a local array), of 16-byte vectors (`&[Vec16<T>]`) or of fragments: `&mut [FragA<T>]` (T bf16, f16, e4m3, e5m2), `&[FragB<T>]` (bf16, f16), `&mut [FragC<f32>]`");
        None
    }

    /// `&TensorMap<T>`: read-only (the copy engine reads it from parameter space), of a type the
    /// copy engine moves.
    fn tensor_map_param(&mut self, seg: &syn::PathSegment, mutable: bool) -> Option<Ty> {
        let elem = match &seg.arguments {
            syn::PathArguments::AngleBracketed(ab) if ab.args.len() == 1 => match &ab.args[0] {
                syn::GenericArgument::Type(t) => scalar_of_type(t),
                _ => None,
            },
            _ => None,
        };
        let Some(elem) = elem.filter(|s| *s != Scalar::Bool) else {
            self.errors.push(
                Sp::of(&seg.arguments),
                "`TensorMap` takes one numeric element type, e.g. `TensorMap<bf16>`",
            );
            return None;
        };
        Some(if mutable {
            Ty::TensorMapMut(elem)
        } else {
            Ty::TensorMap(elem)
        })
    }
}

/// `Name<T>` for a scalar `T`: the wrapper's name and `T`.
fn wrapped_scalar(ty: &syn::Type) -> Option<(&syn::Ident, Scalar)> {
    let syn::Type::Path(tp) = ty else {
        return None;
    };
    let seg = tp.path.segments.last().filter(|_| tp.qself.is_none())?;
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(ab) if ab.args.len() == 1 => match &ab.args[0] {
            syn::GenericArgument::Type(t) => scalar_of_type(t).map(|s| (&seg.ident, s)),
            _ => None,
        },
        _ => None,
    }
}

/// `Vec16<T>` (`T` a scalar but `bool`): 16 bytes of `T` in registers, which a device function
/// takes and returns by value.
pub fn vec16_of_type(ty: &syn::Type) -> Option<Scalar> {
    wrapped_scalar(ty)
        .filter(|(name, s)| *name == "Vec16" && *s != Scalar::Bool)
        .map(|(_, s)| s)
}

/// The scalar a type names, if it is one (`f32`, `half::f16`, ...).
pub fn scalar_of_type(ty: &syn::Type) -> Option<Scalar> {
    match ty {
        syn::Type::Path(tp) if tp.qself.is_none() => {
            let seg = tp.path.segments.last()?;
            if !seg.arguments.is_empty() {
                return None;
            }
            Scalar::from_rust(&seg.ident.to_string())
        }
        syn::Type::Paren(p) => scalar_of_type(&p.elem),
        syn::Type::Group(g) => scalar_of_type(&g.elem),
        _ => None,
    }
}
