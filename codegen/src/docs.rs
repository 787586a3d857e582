//! The intrinsic reference generated from [`INTRINSICS`], for `docs/dsl.md`.

use crate::intrinsics::{Form, Group, Ret, INTRINSICS};

/// Markdown tables of every intrinsic, one per group. `docs/dsl.md` holds this text between
/// its `<!-- intrinsics:start -->` / `<!-- intrinsics:end -->` markers; a test fails when the
/// checked-in copy differs.
pub fn intrinsics_markdown() -> String {
    let mut out = String::new();
    for group in Group::ALL {
        let rows: Vec<_> = INTRINSICS.iter().filter(|r| r.group == group).collect();
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!("### {}\n\n", group.title()));
        out.push_str(
            "| call | returns | scope | `T` | CUDA | collective launch | what it does |\n",
        );
        out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
        for r in rows {
            let args: Vec<String> = r.args.iter().map(|(n, a)| a.doc(n)).collect();
            let call = match r.form {
                _ if r.ret == Ret::DynShared => format!("`{}::<T>()`", r.name),
                _ if r.ret.is_declaration() => format!("`{}::<T, N>()`", r.name),
                Form::Free => format!("`{}({})`", r.name, args.join(", ")),
                Form::Method => {
                    let recv = r.args.first().map(|(n, _)| *n).unwrap_or("x");
                    format!("`{recv}.{}({})`", r.name, args[1..].join(", "))
                }
                Form::Both => {
                    let recv = r.args.first().map(|(n, _)| *n).unwrap_or("x");
                    format!(
                        "`{}({})`, `{recv}.{}({})`",
                        r.name,
                        args.join(", "),
                        r.name,
                        args[1..].join(", ")
                    )
                }
            };
            let ret = match r.ret {
                Ret::Unit => "".to_string(),
                Ret::Elem => "`T`".to_string(),
                Ret::Exact(s) => format!("`{s}`"),
                Ret::PeerView => "peer view of `x`".to_string(),
                Ret::ClusterView => "cluster view of `s`".to_string(),
                Ret::SharedArray => "shared buffer".to_string(),
                Ret::DynShared => "shared buffer".to_string(),
                Ret::FragArray(k) => format!(
                    "N {} fragments",
                    k.decl_name().trim_start_matches("frag_").to_uppercase()
                ),
                Ret::Vec16 => "`Vec16<T>`".to_string(),
            };
            let types = if r.types.is_empty() {
                String::new()
            } else {
                r.types
                    .iter()
                    .map(|(s, _)| s.rust_name())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let collective = if r.prelude.collective() { "yes" } else { "" };
            out.push_str(&format!(
                "| {call} | {ret} | {} | {types} | `{}` | {collective} | {} |\n",
                r.scope.name(),
                r.cuda.replace('|', "\\|"),
                r.doc.replace('|', "\\|")
            ));
        }
        out.push('\n');
    }
    out
}
