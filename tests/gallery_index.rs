//! The gallery's index names every example: each `examples/*.rs` has a row in `docs/gallery.md`
//! (a link to its file), and each row's file exists. `scripts/gallery.sh` runs every file of
//! `examples/`, and `tests/nvrtc/corpus.rs` compiles their kernels; this keeps the index the
//! reader sees in step with both.

use std::path::Path;

#[test]
fn every_example_has_a_row_in_the_gallery_index() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let index = std::fs::read_to_string(root.join("docs/gallery.md")).expect("docs/gallery.md");
    let mut examples: Vec<String> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .map(|e| {
            e.expect("readable entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".rs"))
        .collect();
    examples.sort();
    let missing: Vec<&String> = examples
        .iter()
        .filter(|n| !index.contains(&format!("](../examples/{n})")))
        .collect();
    assert!(
        missing.is_empty(),
        "examples without a row in docs/gallery.md: {missing:?}. Fix: add a row (what it shows, \
         the DSL features it uses) linking ../examples/<name>.rs"
    );
    let linked: Vec<&str> = index
        .split("](../examples/")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    let stale: Vec<&&str> = linked
        .iter()
        .filter(|n| !examples.iter().any(|e| e == *n))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/gallery.md links examples that do not exist: {stale:?}"
    );
}
