//! Turning a generated source into one compilable specialization.

/// Prepend the `#define`s that pick the kernel's symbol name and its comptime values.
///
/// Returns `(full_source, kernel_name)`. The name is `<base_name>_<variant>` followed by
/// `_<param><value>` for each comptime value (a negative value is written `m<abs>`), so every
/// specialization has its own symbol. Booleans are passed as 0/1. The runtime JIT and the CI
/// NVRTC tests both call this.
pub fn specialize(
    source: &str, base_name: &str, variant: &str, comptime: &[(&str, i128)],
) -> (String, String) {
    let mut name = format!("{base_name}_{variant}");
    let mut defines = String::new();
    for (param, value) in comptime {
        let tag = if *value < 0 {
            format!("m{}", value.unsigned_abs())
        } else {
            value.to_string()
        };
        name.push_str(&format!("_{param}{tag}"));
        defines.push_str(&format!("#define PGAS_CT_{param} {}\n", literal(*value)));
    }
    let full = format!("#define PGAS_KERNEL_NAME {name}\n{defines}{source}");
    (full, name)
}

/// Several specializations as one NVRTC program, so the headers (most of a compile) are parsed
/// once: `prelude` once, then each source's remainder in a namespace of its own (their helpers
/// share names) after every macro it defines is reset. `extern "C"` keeps each kernel's
/// symbol as it is. Every source must start, after [`specialize`]'s `#define`s, with `prelude`;
/// `None` when one does not. The runtime JIT and the CI NVRTC tests both batch through this.
pub fn batch(prelude: &str, sources: &[&str]) -> Option<String> {
    let mut out = String::from(prelude);
    for (i, source) in sources.iter().enumerate() {
        let (defines, rest) = source.split_once(prelude)?;
        // Every macro the source defines outside the prelude (specialize's, and the
        // generator's `PGAS_RUST_FILE`, which differs between Rust files) is reset first, so no
        // redefinition warns; the prelude's own (the link-time head's constants) stay.
        for line in defines.lines().chain(rest.lines()) {
            // A function-like macro's name ends at its parameter list.
            if let Some(name) = line
                .strip_prefix("#define ")
                .and_then(|d| d.split_whitespace().next())
                .and_then(|d| d.split('(').next())
            {
                out.push_str(&format!("#undef {name}\n"));
            }
        }
        out.push_str(&format!(
            "{defines}namespace pgas_batch_{i} {{\n{rest}\n}}\n"
        ));
    }
    Some(out)
}

/// A C integer literal for `v` that never overflows its own type (the source casts it to the
/// parameter's type).
fn literal(v: i128) -> String {
    if v == i64::MIN as i128 {
        "(-9223372036854775807ll - 1)".to_string()
    } else if v < 0 {
        format!("(-{}ll)", v.unsigned_abs())
    } else {
        format!("{v}ull")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_defines() {
        let (src, name) = specialize("BODY", "pgas_k_1234", "checked", &[("n", 4), ("neg", -3)]);
        assert_eq!(name, "pgas_k_1234_checked_n4_negm3");
        assert_eq!(
            src,
            "#define PGAS_KERNEL_NAME pgas_k_1234_checked_n4_negm3\n#define PGAS_CT_n 4ull\n#define PGAS_CT_neg (-3ll)\nBODY"
        );
    }

    #[test]
    fn batches_reset_the_macros_and_keep_each_kernel_apart() {
        let (a, _) = specialize(
            "PRE\n#define PGAS_RUST_FILE \"a.rs\"\nA",
            "k",
            "plain",
            &[("n", 1)],
        );
        let (b, _) = specialize("PRE\nB", "k", "checked", &[]);
        assert_eq!(
            batch("PRE\n", &[&a, &b]).unwrap(),
            "PRE\n#undef PGAS_KERNEL_NAME\n#undef PGAS_CT_n\n#undef PGAS_RUST_FILE\n\
             #define PGAS_KERNEL_NAME k_plain_n1\n#define PGAS_CT_n 1ull\n\
             namespace pgas_batch_0 {\n#define PGAS_RUST_FILE \"a.rs\"\nA\n}\n\
             #undef PGAS_KERNEL_NAME\n#define PGAS_KERNEL_NAME k_checked\nnamespace pgas_batch_1 {\nB\n}\n"
        );
        assert_eq!(batch("OTHER\n", &[&a]), None);
    }

    #[test]
    fn extreme_values() {
        assert_eq!(literal(i64::MIN as i128), "(-9223372036854775807ll - 1)");
        assert_eq!(literal(u64::MAX as i128), "18446744073709551615ull");
    }
}
