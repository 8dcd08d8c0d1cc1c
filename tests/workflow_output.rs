//! `workflow --output`: a fresh repository has no `.github/workflows`; gpuprobe creates it, says
//! so, and leaves nothing behind when it cannot write.

mod common;

use predicates::prelude::*;

const ARGS: &[&str] = &["workflow", "--targets", "gfx1100", "--rocm", "7.2.1"];

#[test]
fn missing_directories_are_created_and_named_on_stderr() {
    let repo = tempfile::tempdir().unwrap();
    common::gpuprobe()
        .current_dir(repo.path())
        .args(ARGS)
        .args(["--output", ".github/workflows/llama.yml"])
        .assert()
        .success()
        .stdout(predicate::str::is_empty())
        .stderr(
            predicate::str::contains("created directory .github/workflows").and(
                predicate::str::contains("wrote .github/workflows/llama.yml"),
            ),
        );
    let text = std::fs::read_to_string(repo.path().join(".github/workflows/llama.yml")).unwrap();
    assert!(text.contains("jobs:"), "{text}");

    // The directory is there now: written again without the note.
    common::gpuprobe()
        .current_dir(repo.path())
        .args(ARGS)
        .args(["--output", ".github/workflows/llama.yml"])
        .assert()
        .success()
        .stderr(predicate::str::contains("created directory").not());
}

#[test]
fn a_file_in_the_way_is_exit_2_and_nothing_is_created() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join(".github"), "not a directory").unwrap();
    common::gpuprobe()
        .current_dir(repo.path())
        .args(ARGS)
        .args(["--output", ".github/workflows/llama.yml"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--output").and(predicate::str::contains(
                "cannot create directory `.github/workflows`",
            )),
        );
    let entries: Vec<_> = std::fs::read_dir(repo.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "only the file that was there");
}

#[test]
fn directories_made_for_a_failed_write_are_removed() {
    // A file name longer than NAME_MAX is refused at create, after the directories were made.
    let repo = tempfile::tempdir().unwrap();
    let long = format!("new/sub/{}.yml", "x".repeat(300));
    common::gpuprobe()
        .current_dir(repo.path())
        .args(ARGS)
        .args(["--output", &long])
        .assert()
        .failure();
    assert!(
        !repo.path().join("new").exists(),
        "the directories made for the write are gone"
    );
}
