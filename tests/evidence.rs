//! `klab compare` on real receipts from the H200 (evidence/2026-11-30-timing), re-checked on
//! any machine: the committed artifacts must still hash to what the receipts say, and a
//! tampered copy must be refused.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::klab;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn evidence() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/2026-11-30-timing/transpose-rotated")
}

#[test]
fn committed_h200_receipts_compare_and_tampering_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("transpose-rotated");
    copy_dir(&evidence(), &run);
    let o = klab()
        .arg("compare")
        .arg(run.join("tiled.receipt.json"))
        .arg(run.join("padded.receipt.json"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("candidate faster: ratio 1.96x"), "{out}");

    // Change one byte of one raw sample file.
    let block = run.join("blocks/r03-p1-padded/samples-r01-p0.csv");
    let mut bytes = fs::read(&block).unwrap();
    let last_digit = bytes.iter().rposition(|b| b.is_ascii_digit()).unwrap();
    bytes[last_digit] = if bytes[last_digit] == b'1' {
        b'2'
    } else {
        b'1'
    };
    fs::write(&block, bytes).unwrap();
    let o = klab()
        .arg("compare")
        .arg(run.join("tiled.receipt.json"))
        .arg(run.join("padded.receipt.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("r03-p1-padded/samples-r01-p0.csv"), "{err}");
    assert!(err.contains("changed"), "{err}");
}
