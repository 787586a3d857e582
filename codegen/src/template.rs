//! An intrinsic row's CUDA template (`Intrinsic::cuda`) filled in for one call: shared by the
//! emitter, which writes the call inline, and the NVSHMEM wrappers of link-time compiles
//! (`nvcall.rs`), which put the same text in a wrapper's body.

/// Substitute `{0}`, `{0.len}`, `{n}`, `{T}`, `{C}`, `{op}`, `{line}` in a row's CUDA template.
#[allow(clippy::too_many_arguments)]
pub(crate) fn expand_template(
    template: &str, args: &[String], lens: &[String], count: &str, t: &str, c: &str, op: &str,
    line: &str,
) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = &after[..close];
        let value = match key {
            "n" => count.to_string(),
            "T" => t.to_string(),
            "C" => c.to_string(),
            "op" => op.to_string(),
            "line" => line.to_string(),
            k => match k.split_once('.') {
                Some((i, "len")) => i
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| lens.get(i).cloned())
                    .unwrap_or_default(),
                _ => k
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| args.get(i).cloned())
                    .unwrap_or_default(),
            },
        };
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}
