//! [`debug_fields!`]: the `Debug` impls of the types that show some of their fields (a plan's
//! sizes, not its device buffers and handles) or values computed from them.

/// Writes `impl std::fmt::Debug for $ty`: a `debug_struct` named as the type with one field a
/// `name: value`, each value an expression over the receiver (`|c: Comm|` names it `c`). A
/// trailing `..` ends with `finish_non_exhaustive` (the output says that more is held).
///
/// ```ignore
/// debug_fields!(|c: Comm| team: c.team, rank: c.rank, hierarchy: c.hierarchy());
/// debug_fields!(|_: Cublas| ..);
/// ```
macro_rules! debug_fields {
    (|$s:tt: $ty:ident| $($name:ident: $value:expr),+ $(,)?) => {
        $crate::debug::debug_fields!(@impl $s, $ty, finish, $($name: $value),+);
    };
    (|$s:tt: $ty:ident| $($name:ident: $value:expr,)* ..) => {
        $crate::debug::debug_fields!(@impl $s, $ty, finish_non_exhaustive, $($name: $value),*);
    };
    (@impl $s:tt, $ty:ident, $finish:ident, $($name:ident: $value:expr),*) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $s = self;
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($name), &$value))*
                    .$finish()
            }
        }
    };
}

pub(crate) use debug_fields;

#[cfg(test)]
mod tests {
    struct Plan {
        m: usize,
    }
    debug_fields!(|p: Plan| m: p.m, twice: p.m * 2);

    struct Partial {
        m: usize,
    }
    debug_fields!(|p: Partial| m: p.m, ..);

    struct Opaque;
    debug_fields!(|_: Opaque| ..);

    #[test]
    fn shows_the_named_values_and_says_when_more_is_held() {
        assert_eq!(format!("{:?}", Plan { m: 3 }), "Plan { m: 3, twice: 6 }");
        assert_eq!(format!("{:?}", Partial { m: 3 }), "Partial { m: 3, .. }");
        assert_eq!(format!("{:?}", Opaque), "Opaque { .. }");
    }
}
