//! Property test of the kernel compiler: random well-typed kernels must compile, random
//! mutations of them must either compile or fail with errors whose spans point into the
//! source, and whatever compiles must be accepted by NVRTC (sm_90, against the NVSHMEM
//! headers) without errors or warnings.
//!
//! Deterministic (a fixed-seed xorshift generator) and bounded: a few hundred cases through the
//! compiler, and a sample of the compiled ones batched into a few NVRTC compiles.

use pgas_codegen::{compile_file, specialize, CompiledKernel, Prelude};
use std::fmt::Write;

const GENERATED: usize = 200;
const MUTATIONS_PER_KERNEL: usize = 2;
/// Kernels per NVRTC compile (each with both variants) and how many compiles to run.
const BATCH: usize = 30;
const BATCHES: usize = 4;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const TYPES: &[&str] = &[
    "i32", "u32", "i64", "u64", "f32", "f64", "u8", "i16", "usize", "f16",
];

fn is_float(t: &str) -> bool {
    matches!(t, "f32" | "f64" | "f16")
}

#[derive(Clone)]
struct Buf {
    name: String,
    elem: &'static str,
    sym: bool,
    mutable: bool,
}

/// Builds one random kernel that type-checks.
struct Gen<'r> {
    rng: &'r mut Rng,
    bufs: Vec<Buf>,
    /// Readable scalars: (name, type, assignable).
    vars: Vec<(String, &'static str, bool)>,
    next_var: usize,
    depth: usize,
    /// A `#[pgas_device] fn` of the file: (name, its argument and return type).
    helper: Option<(String, &'static str)>,
}

impl Gen<'_> {
    fn literal(&mut self, t: &str) -> String {
        let v = self.rng.below(100);
        if is_float(t) {
            let lit = format!("{v}.{}", self.rng.below(10));
            if t != "f16" && self.rng.chance(30) {
                format!("{lit}{t}")
            } else {
                lit
            }
        } else if self.rng.chance(25) {
            format!("{v}{t}")
        } else {
            v.to_string()
        }
    }

    fn index(&mut self, b: &Buf) -> String {
        match self.rng.below(4) {
            0 => "0".into(),
            1 => format!("{} % {}.len()", self.usize_expr(), b.name),
            2 => format!("{}.len() - 1", b.name),
            _ => "global_thread_idx()".into(),
        }
    }

    fn usize_expr(&mut self) -> String {
        let choices: Vec<String> = self
            .vars
            .iter()
            .filter(|v| v.1 == "usize")
            .map(|v| v.0.clone())
            .collect();
        match self.rng.below(5) {
            0 if !choices.is_empty() => self.rng.pick(&choices).clone(),
            1 => format!("{}.len()", self.rng.pick(&self.bufs.clone()).name),
            2 => "(thread_idx_x() as usize)".into(),
            3 => "global_thread_idx()".into(),
            _ => self.rng.below(64).to_string(),
        }
    }

    fn expr(&mut self, t: &'static str) -> String {
        self.depth += 1;
        let out = if self.depth > 3 {
            self.leaf(t)
        } else {
            match self.rng.below(9) {
                0 | 1 => self.leaf(t),
                2 | 3 => {
                    let ops: &[&str] = if t == "f16" {
                        &["+", "-", "*"]
                    } else if is_float(t) {
                        &["+", "-", "*", "/"]
                    } else {
                        &["+", "-", "*", "&", "|", "^"]
                    };
                    let op = *self.rng.pick(ops);
                    format!("({} {op} {})", self.expr(t), self.expr(t))
                }
                4 => {
                    let from = *self.rng.pick(TYPES);
                    format!("({} as {t})", self.expr(from))
                }
                5 if matches!(t, "f32" | "f64") => {
                    let m = *self
                        .rng
                        .pick(&["sqrt", "exp", "abs", "floor", "sin", "tanh"]);
                    if self.rng.chance(50) {
                        format!("{}.{m}()", self.paren(t))
                    } else {
                        format!("{m}({})", self.expr(t))
                    }
                }
                6 if t != "f16" => format!("min({}, {})", self.expr(t), self.expr(t)),
                7 => format!(
                    "if {} {{ {} }} else {{ {} }}",
                    self.cond(),
                    self.expr(t),
                    self.expr(t)
                ),
                _ => self.leaf(t),
            }
        };
        self.depth -= 1;
        out
    }

    /// A method receiver of type `t` (cast, so a literal gets its type).
    fn paren(&mut self, t: &'static str) -> String {
        let e = self.leaf(t);
        format!("({e} as {t})")
    }

    fn leaf(&mut self, t: &'static str) -> String {
        let vars: Vec<String> = self
            .vars
            .iter()
            .filter(|v| v.1 == t)
            .map(|v| v.0.clone())
            .collect();
        let bufs: Vec<Buf> = self.bufs.iter().filter(|b| b.elem == t).cloned().collect();
        let syms: Vec<Buf> = bufs.iter().filter(|b| b.sym).cloned().collect();
        match self.rng.below(7) {
            0 if !vars.is_empty() => self.rng.pick(&vars).clone(),
            1 | 2 if !bufs.is_empty() => {
                let b = self.rng.pick(&bufs).clone();
                format!("{}[{}]", b.name, self.index(&b))
            }
            3 if !syms.is_empty() => {
                let b = self.rng.pick(&syms).clone();
                format!("g(&{}[0], my_pe())", b.name)
            }
            4 if matches!(t, "i32" | "u32" | "i64" | "u64" | "f32" | "f64" | "f16") => {
                let v = self.literal(t);
                format!("shfl_xor_sync(0xffff_ffff, {v}, 1)")
            }
            5 if self.helper.as_ref().is_some_and(|h| h.1 == t) && self.depth < 3 => {
                let name = self
                    .helper
                    .as_ref()
                    .map(|h| h.0.clone())
                    .unwrap_or_default();
                format!("{name}({}, {})", self.literal(t), self.literal(t))
            }
            _ => self.literal(t),
        }
    }

    fn cond(&mut self) -> String {
        let t = *self.rng.pick(TYPES);
        let op = *self.rng.pick(&["<", "<=", "==", "!=", ">", ">="]);
        let c = format!("{} {op} {}", self.expr(t), self.expr(t));
        match self.rng.below(4) {
            0 => format!("!({c})"),
            1 => format!("{c} && {}", self.usize_expr() + " > 1"),
            _ => c,
        }
    }

    fn stmts(&mut self, n: usize, out: &mut String, indent: usize) {
        let scope = self.vars.len();
        for _ in 0..n {
            self.stmt(out, indent);
        }
        self.vars.truncate(scope);
    }

    fn stmt(&mut self, out: &mut String, indent: usize) {
        let pad = "    ".repeat(indent);
        let writable: Vec<Buf> = self.bufs.iter().filter(|b| b.mutable).cloned().collect();
        match self.rng.below(10) {
            0..=2 => {
                let t = *self.rng.pick(TYPES);
                let e = self.expr(t);
                let name = format!("v{}", self.next_var);
                self.next_var += 1;
                let ann = if self.rng.chance(50) {
                    format!(": {t}")
                } else {
                    String::new()
                };
                let _ = writeln!(out, "{pad}let mut {name}{ann} = {e};");
                self.vars.push((name, t, true));
            }
            3 | 4 if !writable.is_empty() => {
                let b = self.rng.pick(&writable).clone();
                let i = self.index(&b);
                let e = self.expr(b.elem);
                let _ = writeln!(out, "{pad}{}[{i}] = {e};", b.name);
            }
            5 if indent < 3 => {
                let _ = writeln!(out, "{pad}if {} {{", self.cond());
                let n = 1 + self.rng.below(2);
                self.stmts(n, out, indent + 1);
                let _ = writeln!(out, "{pad}}} else {{");
                self.stmts(1, out, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            6 if indent < 3 => {
                let var = format!("i{}", self.next_var);
                self.next_var += 1;
                let end = self.usize_expr();
                let step = if self.rng.chance(30) {
                    format!(".step_by({})", 1 + self.rng.below(4))
                } else {
                    String::new()
                };
                if step.is_empty() {
                    let _ = writeln!(out, "{pad}for {var} in 0..{end} {{");
                } else {
                    let _ = writeln!(out, "{pad}for {var} in (0..{end}){step} {{");
                }
                self.vars.push((var, "usize", false));
                let n = 1 + self.rng.below(2);
                self.stmts(n, out, indent + 1);
                self.vars.pop();
                let _ = writeln!(out, "{pad}}}");
            }
            7 => {
                let assignable: Vec<(String, &'static str, bool)> =
                    self.vars.iter().filter(|v| v.2).cloned().collect();
                if assignable.is_empty() {
                    let _ = writeln!(out, "{pad}sync_threads();");
                } else {
                    let (name, t, _) = self.rng.pick(&assignable).clone();
                    let op = if is_float(t) {
                        *self.rng.pick(&["+=", "-=", "*="])
                    } else {
                        *self.rng.pick(&["+=", "^=", "|="])
                    };
                    let e = self.expr(t);
                    let _ = writeln!(out, "{pad}{name} {op} {e};");
                }
            }
            _ => self.intrinsic(out, &pad),
        }
    }

    fn intrinsic(&mut self, out: &mut String, pad: &str) {
        let pe = *self
            .rng
            .pick(&["0", "my_pe()", "(my_pe() + 1) % n_pes()", "n_pes() - 1"]);
        let syms: Vec<Buf> = self
            .bufs
            .iter()
            .filter(|b| b.sym && b.mutable)
            .cloned()
            .collect();
        if syms.is_empty() {
            let _ = writeln!(out, "{pad}threadfence();");
            return;
        }
        let dst = self.rng.pick(&syms).clone();
        let srcs: Vec<Buf> = self
            .bufs
            .iter()
            .filter(|b| b.elem == dst.elem && b.name != dst.name)
            .cloned()
            .collect();
        // The types `atomic_add` takes (NVSHMEM 3.4.5 has no int64 or ptrdiff add).
        let amo = matches!(dst.elem, "i32" | "u32" | "u64" | "usize");
        let local_add = matches!(
            dst.elem,
            "i32" | "u32" | "i64" | "u64" | "usize" | "f32" | "f64"
        );
        match self.rng.below(9) {
            0 => {
                let v = self.expr(dst.elem);
                let _ = writeln!(out, "{pad}p(&mut {}[0], {v}, {pe});", dst.name);
            }
            6 if !srcs.is_empty() => {
                let src = self.rng.pick(&srcs).clone();
                let f = *self
                    .rng
                    .pick(&["get", "get_nbi", "get_block", "get_nbi_warp"]);
                if src.sym {
                    let _ = writeln!(
                        out,
                        "{pad}{f}(&mut {}[1..], &{}[..], {pe});",
                        dst.name, src.name
                    );
                } else {
                    let _ = writeln!(out, "{pad}{f}(&mut {}[1..], {}, {pe});", dst.name, dst.name);
                }
            }
            7 if local_add => {
                let v = self.literal(dst.elem);
                let _ = writeln!(out, "{pad}atomic_add_local(&mut {}[0], {v});", dst.name);
            }
            8 => {
                let v = self.literal("u64");
                let _ = writeln!(
                    out,
                    "{pad}signal_op(&mut sig[0], {v}, SignalOp::Add, {pe});"
                );
                let _ = writeln!(out, "{pad}signal_wait_until(&sig[0], Cmp::Ge, {v});");
            }
            1 if !srcs.is_empty() => {
                let src = self.rng.pick(&srcs).clone();
                let f =
                    *self
                        .rng
                        .pick(&["put", "put_nbi", "put_block", "put_warp", "put_nbi_block"]);
                let _ = writeln!(
                    out,
                    "{pad}{f}(&mut {}[0..1], &{}[..], {pe});",
                    dst.name, src.name
                );
            }
            2 if amo => {
                let v = self.literal(dst.elem);
                let _ = writeln!(out, "{pad}atomic_add(&mut {}[0], {v}, {pe});", dst.name);
            }
            3 => {
                let _ = writeln!(out, "{pad}quiet();");
            }
            4 => {
                let _ = writeln!(out, "{pad}barrier_all_block();");
            }
            _ => {
                let _ = writeln!(out, "{pad}if {}.has_peer({pe}) {{", dst.name);
                let v = self.expr(dst.elem);
                let _ = writeln!(out, "{pad}    {}.peer({pe})[0] = {v};", dst.name);
                let _ = writeln!(out, "{pad}}}");
            }
        }
    }
}

fn generate(rng: &mut Rng, id: usize) -> String {
    let mut bufs: Vec<Buf> = Vec::new();
    let n = 1 + rng.below(3);
    for i in 0..n {
        bufs.push(Buf {
            name: format!("b{i}"),
            elem: TYPES[rng.below(TYPES.len())],
            sym: rng.chance(70),
            mutable: i == 0 || rng.chance(50),
        });
    }
    let mut params: Vec<String> = bufs
        .iter()
        .map(|b| {
            let kind = if b.sym { "SymTensor" } else { "CudaSlice" };
            let m = if b.mutable { "&mut " } else { "&" };
            format!("{}: {m}{kind}<{}>", b.name, b.elem)
        })
        .collect();
    let mut vars = Vec::new();
    for j in 0..rng.below(3) {
        let t = *rng.pick(TYPES);
        params.push(format!("s{j}: {t}"));
        vars.push((format!("s{j}"), t, false));
    }
    if rng.chance(20) {
        params.push("#[comptime] c0: usize".into());
        vars.push(("c0".to_string(), "usize", false));
    }
    params.push("sig: &mut SymTensor<u64>".into());
    let mut prologue = String::new();
    let mut helper_src = String::new();
    let mut helper = None;
    if rng.chance(30) {
        let t = *rng.pick(&["f32", "i32", "u64", "f64"]);
        helper_src = format!(
            "#[pgas_device]\nfn h{id}(a: {t}, b: {t}) -> {t} {{\n    if a > b {{\n        return a - b;\n    }}\n    a + b\n}}\n\n"
        );
        helper = Some((format!("h{id}"), t));
    }
    if rng.chance(30) {
        let t = *rng.pick(TYPES);
        prologue = format!("    let sh = shared_array::<{t}, 64>();\n");
        bufs.push(Buf {
            name: "sh".into(),
            elem: t,
            sym: false,
            mutable: true,
        });
    }
    let mut g = Gen {
        rng,
        bufs,
        vars,
        next_var: 0,
        depth: 0,
        helper,
    };
    let mut body = prologue;
    let count = 1 + g.rng.below(6);
    g.stmts(count, &mut body, 1);
    format!(
        "use pgas::prelude::*;\n\n{helper_src}#[pgas_kernel]\nfn fuzz_{id}({}) {{\n{body}}}\n",
        params.join(", ")
    )
}

/// A random edit: may break syntax, types or the subset's rules.
fn mutate(rng: &mut Rng, src: &str) -> String {
    let body_start = src.find('{').unwrap_or(0);
    let (head, body) = src.split_at(body_start);
    match rng.below(8) {
        0 => {
            let (from, to) = (*rng.pick(TYPES), *rng.pick(TYPES));
            src.replacen(from, to, 1)
        }
        1 => src.replacen("&mut ", "&", 1),
        2 => format!("{head}{}", body.replacen(" + ", " && ", 1)),
        3 => format!("{head}{}", body.replacen("0", "0.5", 1)),
        4 => {
            let snippet = *rng.pick(&[
                "let c = |x: f32| x;",
                "let v = vec![1];",
                "let s = \"text\";",
                "println!(\"hi\");",
                "let m = match 1 { _ => 2 };",
                "undefined_fn(1);",
                "let q = b0.iter();",
                "b0[0] = SOME_GLOBAL;",
                "put(b0, b0, 1.5);",
                "signal_op(&mut b0[0], 1, SignalOp::Set, 0);",
                "let r = &mut b0[0];",
                "loop { break 1; }",
            ]);
            let at = body.find('\n').map(|i| i + 1).unwrap_or(body.len());
            format!("{head}{}{snippet}\n{}", &body[..at], &body[at..])
        }
        5 => {
            // Drop one character of the body.
            let chars: Vec<char> = body.chars().collect();
            if chars.len() < 3 {
                return src.to_string();
            }
            let i = 1 + rng.below(chars.len() - 2);
            let mut s: String = head.to_string();
            s.extend(chars[..i].iter().chain(&chars[i + 1..]));
            s
        }
        6 => src.replacen("[0]", "[0i32]", 1),
        _ => format!("{head}{}", body.replacen("let mut", "let", 1)),
    }
}

fn check_errors(src: &str, errors: &[pgas_codegen::CodegenError]) {
    let lines = src.lines().count().max(1);
    assert!(
        !errors.is_empty(),
        "an error result without errors for:\n{src}"
    );
    for e in errors {
        assert!(!e.message.is_empty(), "empty error message for:\n{src}");
        assert!(
            e.line() >= 1 && e.line() <= lines,
            "error `{}` at line {} outside the source ({lines} lines):\n{src}",
            e.message,
            e.line()
        );
    }
}

#[test]
fn generated_and_mutated_kernels() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compiled: Vec<(String, CompiledKernel)> = Vec::new();
    let (mut ok, mut rejected) = (0, 0);
    for id in 0..GENERATED {
        let src = generate(&mut rng, id);
        match compile_file(&src, &format!("fuzz_{id}.rs")) {
            Ok(mut ks) => {
                ok += 1;
                compiled.push((src.clone(), ks.remove(0)));
            }
            Err(errors) => {
                let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                panic!(
                    "a generated well-typed kernel was rejected:\n{src}\n{}",
                    list.join("\n")
                );
            }
        }
        for m in 0..MUTATIONS_PER_KERNEL {
            let mutated = mutate(&mut rng, &src);
            let name = format!("fuzz_{id}_m{m}.rs");
            match compile_file(&mutated, &name) {
                Ok(mut ks) if !ks.is_empty() => {
                    ok += 1;
                    compiled.push((mutated, ks.remove(0)));
                }
                Ok(_) => {}
                Err(errors) => {
                    rejected += 1;
                    check_errors(&mutated, &errors);
                }
            }
        }
    }
    assert!(
        rejected > GENERATED / 4,
        "mutations should often be rejected ({rejected})"
    );
    assert!(ok >= GENERATED, "{ok} kernels compiled");

    let toolchain = match pgas_runtime::jit::Toolchain::discover() {
        Ok(t) => t,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping the NVRTC half: no toolchain ({e})");
            return;
        }
        Err(e) => panic!("NVRTC toolchain not found in CI: {e}"),
    };
    // A spread-out sample, batched by the prelude the sources start with (collective kernels
    // get NVSHMEM's full one): that prelude once, then each kernel under its own symbol, file
    // name and comptime values.
    let stride = (compiled.len() / (BATCH * BATCHES)).max(1);
    let sample: Vec<&(String, CompiledKernel)> = compiled
        .iter()
        .step_by(stride)
        .take(BATCH * BATCHES)
        .collect();
    let by_prelude: Vec<Vec<&(String, CompiledKernel)>> = Prelude::ALL
        .iter()
        .map(|p| {
            sample
                .iter()
                .copied()
                .filter(|(_, k)| k.prelude == *p)
                .collect()
        })
        .collect();
    let chunks = by_prelude.iter().flat_map(|g| g.chunks(BATCH));
    for (b, chunk) in chunks.enumerate() {
        // As the JIT batches: the prelude once, each specialization in a namespace of its own
        // (`pgas_codegen::batch`), with the NVSHMEM call wrappers it carries.
        let mut sources = Vec::new();
        for (i, (_, k)) in chunk.iter().enumerate() {
            for (variant, source) in [("plain", &k.plain), ("checked", &k.checked)] {
                let comptime: Vec<(&str, i128)> =
                    k.comptime.iter().map(|c| (c.as_str(), 3)).collect();
                let (full, _) = specialize(source, &format!("fuzz_b{b}_{i}"), variant, &comptime);
                sources.push(full);
            }
        }
        let prelude = Prelude::of_source(&sources[0]).expect("a generated source has a prelude");
        let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
        let batch =
            pgas_codegen::batch(prelude.text(), &refs).expect("sources start with their prelude");
        // `--Ofast-compile=max`, as tests/nvrtc/corpus.rs compiles: it changes the optimization,
        // not what the front end accepts or warns about, which is what this checks.
        let mut options = toolchain.options((9, 0), &batch);
        options.push("--Ofast-compile=max".to_owned());
        let result = toolchain.compile_with(&batch, &format!("fuzz_batch_{b}"), (9, 0), &options);
        let log = match &result {
            Ok(c) => c.log.clone(),
            Err(e) => e.to_string(),
        };
        let bad = result.is_err() || log.contains("warning") || log.contains("error");
        if bad {
            let culprits: Vec<&str> = chunk
                .iter()
                .filter(|(_, k)| log.contains(&format!("{}.rs", k.rust_name)))
                .map(|(src, _)| src.as_str())
                .collect();
            panic!(
                "NVRTC rejected generated code:\n{log}\nfrom:\n{}",
                culprits.join("\n----\n")
            );
        }
    }
}
