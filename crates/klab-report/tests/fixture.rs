//! The fixture run folder stays valid: its profile holds the H200 counters the report's
//! tests expect, and every artifact lab.json lists re-hashes to its record.

mod common;

use klab_model::bound::{Agreement, ProfileRecord, PROFILE_SCHEMA};
use klab_report::data::ArtifactStatus;

#[test]
fn fixture_profile_holds_the_h200_counters() {
    let text = std::fs::read_to_string(common::fixture().join("profile/profile.json")).unwrap();
    let p: ProfileRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(p.schema, PROFILE_SCHEMA);
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
    assert_eq!(st.predicted, Some(32.0));
    assert!((st.measured.unwrap() - 32.005).abs() < 1e-3);
    assert_eq!(st.agreement, Agreement::Agrees);
    let conflicts = row("tiled", "shared load bank conflicts");
    assert_eq!(conflicts.measured, Some(16_494_464.0));
    assert_eq!(conflicts.predicted, Some(524_288.0 * 31.0));
    assert_eq!(conflicts.agreement, Agreement::Agrees);
    // padded's few conflicts are what the model does not explain.
    let padded = row("padded", "shared load bank conflicts");
    assert_eq!(
        (padded.predicted, padded.measured),
        (Some(0.0), Some(60_958.0))
    );
    assert_eq!(padded.agreement, Agreement::Disagrees);
}

#[test]
fn every_fixture_artifact_verifies() {
    let run = klab_report::load(&common::fixture()).unwrap();
    assert!(run.artifacts.len() > 20);
    for a in &run.artifacts {
        assert_eq!(a.status, ArtifactStatus::Verified, "{}", a.path);
    }
}
