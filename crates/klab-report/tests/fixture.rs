//! The fixture run folder stays valid: its profile is what klab-core's bound types build
//! from the real H200 numbers, and every artifact lab.json lists re-hashes to its record.

mod common;

use klab_core::bound::{Agreement, ProfileRecord};
use klab_report::data::ArtifactStatus;

/// Rewrite the `bytes` and `sha256` of `rel`'s entry in the fixture's lab.json, leaving
/// the rest of the file as it is.
fn rehash_in_lab_json(rel: &str, bytes: &[u8]) {
    let lab = common::fixture().join("lab.json");
    let text = std::fs::read_to_string(&lab).unwrap();
    let anchor = format!("\"path\": \"{rel}\",");
    let at = text.find(&anchor).expect("lab.json lists the file");
    let end = at + text[at..].find('}').unwrap();
    let entry = format!(
        "{anchor}\n      \"bytes\": {},\n      \"sha256\": \"{}\"\n    ",
        bytes.len(),
        klab_core::artifact::sha256_hex(bytes)
    );
    std::fs::write(&lab, format!("{}{entry}{}", &text[..at], &text[end..])).unwrap();
}

#[test]
fn fixture_profile_is_what_the_bound_types_build() {
    let want = serde_json::to_string_pretty(&common::fixture_profile()).unwrap() + "\n";
    let path = common::fixture().join("profile/profile.json");
    if std::env::var("KLAB_REPORT_WRITE_FIXTURE").as_deref() == Ok("1") {
        std::fs::write(&path, &want).unwrap();
        rehash_in_lab_json("profile/profile.json", want.as_bytes());
    }
    let have = std::fs::read_to_string(&path).unwrap();
    assert!(
        have == want,
        "{} is stale: rebuild it with KLAB_REPORT_WRITE_FIXTURE=1 cargo test -p klab-report --test fixture (which also re-hashes it in lab.json)",
        path.display()
    );
    let back: ProfileRecord = serde_json::from_str(&have).unwrap();
    assert_eq!(back, common::fixture_profile());
}

#[test]
fn fixture_profile_holds_the_h200_counters() {
    let p = common::fixture_profile();
    let row = |k: &str, q: &str| {
        p.kernels
            .iter()
            .find(|x| x.kernel == k)
            .unwrap()
            .counters
            .iter()
            .find(|r| r.quantity == q)
            .unwrap()
            .clone()
    };
    let st = row("naive", "global store sectors/request");
    assert_eq!((st.predicted, st.measured), (Some(32.0), Some(32.0)));
    assert_eq!(st.agreement, Agreement::Agrees);
    let conflicts = row("tiled", "shared load bank conflicts");
    assert_eq!(conflicts.measured, Some(16_488_054.0));
    assert_eq!(conflicts.predicted, Some(524_288.0 * 31.0));
    assert_eq!(conflicts.agreement, Agreement::Agrees);
    let zero = row("naive", "shared load bank conflicts");
    assert_eq!((zero.predicted, zero.measured), (Some(0.0), Some(0.0)));
}

#[test]
fn every_fixture_artifact_verifies() {
    let run = klab_report::load(&common::fixture()).unwrap();
    assert!(run.artifacts.len() > 20);
    for a in &run.artifacts {
        assert_eq!(a.status, ArtifactStatus::Verified, "{}", a.path);
    }
}
