//! `docs/dsl.md`'s intrinsic tables are generated from the intrinsic table; this test fails
//! when the checked-in copy is stale. `PGAS_BLESS=1 cargo test -p pgas-codegen --test docs`
//! rewrites it.

use std::path::Path;

const START: &str = "<!-- intrinsics:start -->\n";
const END: &str = "<!-- intrinsics:end -->";

#[test]
fn dsl_reference_lists_every_intrinsic() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dsl.md");
    let doc = std::fs::read_to_string(&path).expect("docs/dsl.md exists");
    let (Some(s), Some(e)) = (doc.find(START), doc.find(END)) else {
        panic!("docs/dsl.md lacks the intrinsics markers");
    };
    let generated = pgas_codegen::intrinsics_markdown();
    let current = &doc[s + START.len()..e];
    if current != generated {
        if std::env::var_os("PGAS_BLESS").is_some() {
            let new = format!("{}{START}{generated}{}", &doc[..s], &doc[e..]);
            std::fs::write(&path, new).expect("docs/dsl.md writable");
        } else {
            panic!("docs/dsl.md's intrinsic tables are stale; run PGAS_BLESS=1 cargo test -p pgas-codegen --test docs");
        }
    }
    for row in pgas_codegen::intrinsics::INTRINSICS {
        assert!(
            generated.contains(&format!("`{}(", row.name))
                || generated.contains(&format!("`{}::<", row.name))
                || generated.contains(&format!(".{}(", row.name)),
            "{}",
            row.name
        );
    }
}
