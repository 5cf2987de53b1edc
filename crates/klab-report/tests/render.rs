//! The report on the fixture run (a trimmed real H200 lab run): numbers, determinism,
//! snapshots of every plot and of the markdown, notes for missing artifacts, escaping,
//! and writing.

mod common;

use std::fs;
use std::path::Path;

use klab_model::bound::{compare, Agreement, Measured, ProfileRecord};
use klab_model::predict::predict;
use klab_report::metrics::{self, roof_axes, roof_position};
use klab_report::plots;
use klab_report::{load, render, ReportError};
use klab_spec::variant::{BLOCK_ROWS, TILE};
use klab_spec::Variant;

fn plot<'a>(r: &'a klab_report::Report, name: &str) -> &'a str {
    &r.plots.iter().find(|(n, _)| n == name).unwrap().1
}

fn edit_json(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// A copy of the fixture whose rounds/summary.json is as a klab older than the rates wrote
/// it: no `rates`, no `ceiling`.
fn fixture_without_rates() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, run) = common::fixture_copy();
    edit_json(&run.join("rounds/summary.json"), |v| {
        let o = v.as_object_mut().unwrap();
        o.remove("rates");
        o.remove("ceiling");
    });
    (tmp, run)
}

#[test]
fn peaks_come_from_the_device_and_the_ceiling_from_the_rounds() {
    let run = load(&common::fixture()).unwrap();
    let p = metrics::peaks(&run);
    // 2 x 3,201,000 kHz x 6016 bit / 8.
    assert!((p.theoretical_gb_s.unwrap() - 4814.304).abs() < 1e-9);
    // 132 SMs x 128 lanes x 2 x 1.98 GHz.
    assert!((p.fp32_gflops.clone().unwrap() - 66_908.16).abs() < 1e-6);
    assert_eq!(p.ceiling_gb_s, Some(2651.2666462046996));
    assert_eq!(
        p.ceiling_basis,
        "the fastest copy kernel in the rounds (copy), median over every sample of its blocks, from rounds/summary.json"
    );
    let rows = metrics::bandwidth_rows(&run).unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.rate.kernel.as_str()).collect();
    assert_eq!(names, ["copy", "naive", "tiled", "padded"]);
    // The rates as klab rounds wrote them.
    let rates = &run.rounds.as_ref().unwrap().rates;
    for (r, rate) in rows.iter().zip(rates) {
        assert_eq!(&r.rate, rate);
    }
    assert_eq!(rows[0].rate.pct_of_ceiling, Some(100.0));
    // p10 and p90 (linear at q(N-1)) of padded's ten block GB/s in rounds/rounds.csv.
    assert!((rows[3].low_gb_s.unwrap() - 3101.27).abs() < 1e-9);
    assert!((rows[3].high_gb_s.unwrap() - 3126.71).abs() < 1e-9);

    let (_tmp, old) = fixture_without_rates();
    let run = load(&old).unwrap();
    let p = metrics::peaks(&run);
    assert_eq!(p.ceiling_gb_s, None);
    assert_eq!(
        p.ceiling_basis,
        "unknown: rounds/summary.json has no rates (written by a klab older than the ceilings step)"
    );
    let none = metrics::bandwidth_rows(&run).unwrap_err();
    assert_eq!(p.ceiling_basis, format!("unknown: {none}"));
}

#[test]
fn roofline_places_zero_flop_kernels_at_the_left_edge_and_triad_at_its_intensity() {
    let run = load(&common::fixture()).unwrap();
    let p = metrics::peaks(&run);
    let rows = metrics::bandwidth_rows(&run).unwrap();
    let receipts: Vec<(String, &klab_evidence::receipt::Receipt)> = run
        .receipts
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (e.path.clone(), e.receipt.as_ref().unwrap()))
        .collect();
    // benchmark/ (four transposes and triad), rounds/ (four) and ceilings/ (five).
    assert_eq!(receipts.len(), 14);
    let points = metrics::roof_points(&rows, &receipts);
    let peak = p.theoretical_gb_s.unwrap();
    let axes = roof_axes(&points, peak, p.fp32_gflops.clone().ok());
    assert_eq!(axes.x_min, 0.01);
    let padded = points.iter().find(|x| x.label == "padded").unwrap();
    let g = 3116.124814264487;
    let (x, y) = roof_position(padded, &axes);
    assert_eq!(x, 0.01);
    assert!((y - 0.01 * g).abs() < 1e-12);
    assert!((y / (x * peak) - g / peak).abs() < 1e-12);
    let triad = points.iter().find(|x| x.label == "triad_f32").unwrap();
    // 2,000,006 FLOPs over 12,000,036 useful bytes, 9.024 us median.
    let ai = triad.intensity.unwrap();
    assert!((ai - 2.0 / 12.0).abs() < 1e-9, "{ai}");
    assert!((triad.gflop_s - 2_000_006.0 / 9_023.999_795_317_65).abs() < 1e-6);
    assert_eq!(roof_position(triad, &axes), (ai, triad.gflop_s));
    // Every kernel of the rates (transposes and copies): zero-FLOP, drawn hollow.
    assert_eq!(points.iter().filter(|x| x.intensity.is_none()).count(), 4);
    // Without rates only the receipts that do FLOPs remain.
    let (_tmp, old) = fixture_without_rates();
    let none = metrics::roof_points(&[], &receipts);
    assert_eq!(none.len(), 1);
    assert!(metrics::bandwidth_rows(&load(&old).unwrap()).is_err());
}

#[test]
fn the_same_run_renders_byte_identical_files() {
    let a = render(&load(&common::fixture()).unwrap());
    let b = render(&load(&common::fixture()).unwrap());
    assert_eq!(a, b);
    // A copy elsewhere renders the same too (no path leaks into the output).
    let (_tmp, run) = common::fixture_copy();
    assert_eq!(render(&load(&run).unwrap()), a);
    let names: Vec<&str> = a.plots.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "bandwidth.svg",
            "rounds.svg",
            "roofline.svg",
            "counters.svg"
        ]
    );
}

/// `klab lab` writes the report, then records the report step and the report's files in
/// lab.json: `klab report RUN` run on that folder, again and again, writes the same bytes
/// and never checks the report's own earlier copy (it used to list and re-hash its files
/// and grow by a step row each time).
#[test]
fn the_report_is_a_fixed_point_of_its_own_run_folder() {
    let (_tmp, run) = common::fixture_copy();
    let first = render(&load(&run).unwrap());
    let written = klab_report::write(&run, &first).unwrap();
    // What the lab's report step adds to lab.json after writing.
    edit_json(&run.join("lab.json"), |v| {
        let rel: Vec<String> = written
            .iter()
            .map(|p| p.strip_prefix(&run).unwrap().display().to_string())
            .collect();
        let steps = v["steps"].as_array_mut().unwrap();
        steps.retain(|s| s["name"] != "report");
        steps.push(serde_json::json!({"name": "report", "status": "ran",
            "detail": "report/index.html and report/report.md", "artifacts": rel}));
        let artifacts = v["artifacts"].as_array_mut().unwrap();
        for (p, r) in written.iter().zip(&rel) {
            let bytes = fs::read(p).unwrap();
            artifacts.push(serde_json::json!({"path": r, "bytes": bytes.len(),
                "sha256": klab_core::artifact::sha256_hex(&bytes)}));
        }
    });
    let files = |run: &Path| -> Vec<Vec<u8>> {
        let mut v = vec![
            fs::read(run.join("report/index.html")).unwrap(),
            fs::read(run.join("report/report.md")).unwrap(),
        ];
        for (name, _) in &first.plots {
            v.push(fs::read(run.join("report/plots").join(name)).unwrap());
        }
        v
    };
    let before = files(&run);
    for _ in 0..2 {
        let again = render(&load(&run).unwrap());
        assert_eq!(again, first);
        klab_report::write(&run, &again).unwrap();
        assert_eq!(files(&run), before);
    }
    let md = String::from_utf8(before[1].clone()).unwrap();
    assert!(!md.contains("report/index.html |"), "lists its own files");
}

/// `--out DIR` names a folder of the user's: a report goes over an earlier report there
/// and over no other file it would write (others it leaves alone), and a `plots` link (in
/// that folder or a run's) is refused; each refusal writes nothing.
#[test]
fn a_report_replaces_only_a_report() {
    let r = render(&load(&common::fixture()).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    klab_report::write_into(&out, &r).unwrap();
    klab_report::write_into(&out, &r).unwrap();

    let mine = tmp.path().join("mine");
    fs::create_dir(&mine).unwrap();
    fs::write(mine.join("index.html"), "MINE").unwrap();
    let e = klab_report::write_into(&mine, &r).unwrap_err().to_string();
    assert!(
        e.contains("index.html") && e.contains("give another --out"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(mine.join("index.html")).unwrap(), "MINE");
    fs::remove_file(mine.join("index.html")).unwrap();
    fs::write(mine.join("report.md"), "MINE").unwrap();
    let e = klab_report::write_into(&mine, &r).unwrap_err().to_string();
    assert!(
        e.contains("report.md: not an earlier klab report's file"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(mine.join("report.md")).unwrap(), "MINE");
    // Files the report does not write are left as they are, and do not stop it.
    fs::remove_file(mine.join("report.md")).unwrap();
    fs::write(mine.join(".DS_Store"), "MINE").unwrap();
    klab_report::write_into(&mine, &r).unwrap();
    assert_eq!(fs::read_to_string(mine.join(".DS_Store")).unwrap(), "MINE");

    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let (_run_tmp, run) = common::fixture_copy();
    for dir in [tmp.path().join("linked"), run.join(klab_report::REPORT_DIR)] {
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("plots")).unwrap();
    }
    let e = klab_report::write_into(&tmp.path().join("linked"), &r)
        .unwrap_err()
        .to_string();
    assert!(e.contains("plots: not a folder"), "{e}");
    let e = klab_report::write(&run, &r).unwrap_err().to_string();
    assert!(e.contains("plots: not a folder"), "{e}");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn plot_snapshots() {
    let r = render(&load(&common::fixture()).unwrap());
    insta::assert_snapshot!("bandwidth_svg", plot(&r, "bandwidth.svg"));
    insta::assert_snapshot!("rounds_svg", plot(&r, "rounds.svg"));
    insta::assert_snapshot!("roofline_svg", plot(&r, "roofline.svg"));
    insta::assert_snapshot!("counters_svg", plot(&r, "counters.svg"));
}

#[test]
fn markdown_snapshot() {
    let r = render(&load(&common::fixture()).unwrap());
    insta::assert_snapshot!("report_md", r.markdown);
}

#[test]
fn plots_draw_their_series_in_their_own_colours() {
    let (_tmp, rated) = common::fixture_copy();
    let r = render(&load(&rated).unwrap());
    let hex = |c: plots::Rgb| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
    for (file, colour) in plots::CHECK_COLOURS {
        for (other, svg) in &r.plots {
            let n = svg.matches(&hex(colour)).count();
            if other == file {
                // At least the series and its legend swatch.
                assert!(n >= 2, "{file} draws {} {n} times", hex(colour));
            } else {
                assert_eq!(n, 0, "{other} uses {file}'s check colour");
            }
        }
        assert!(!r.html.contains(&format!(
            "#{:02x}{:02x}{:02x}",
            colour.0, colour.1, colour.2
        )));
    }
    // The page inlines the four SVGs, no script, no external resource.
    assert_eq!(r.html.matches("<svg ").count(), 4);
    let lower = r.html.to_lowercase();
    assert!(!lower.contains("<script"));
    assert!(!lower.contains("src="));
    assert!(!lower.contains("https:"));
    // The only URLs are the SVG namespace declarations.
    assert_eq!(
        lower.matches("http:").count(),
        lower
            .matches("xmlns=\"http://www.w3.org/2000/svg\"")
            .count()
    );
}

#[test]
fn roofline_caption_says_how_zero_flop_kernels_are_drawn_and_why_a_roof_is_missing() {
    let (_tmp, run) = common::fixture_copy();
    let r = render(&load(&run).unwrap());
    assert!(r.html.contains("Transposes and copies do 0 FLOPs"));
    assert!(r.html.contains("hollow markers at the left edge of the x axis (x = 0.01 FLOP/byte) at y = 0.01 x achieved GB/s"));
    assert!(r.html.contains("Compute roof: FP32 peak 66,908 GFLOP/s"));
    assert!(r.html.contains("copy-kernel reference"));
    // Without the SM clock the compute roof is not drawn, and the caption says why.
    edit_json(&run.join("environment.json"), |v| {
        v["device"].as_object_mut().unwrap().remove("sm_clock_khz");
    });
    let r2 = render(&load(&run).unwrap());
    assert!(r2
        .html
        .contains("The compute roof is not drawn: the device record has no sm_clock_khz"));
    assert!(!plot(&r2, "roofline.svg").contains("FP32 compute roof"));
    assert!(plot(&r, "roofline.svg").contains("FP32 compute roof"));
}

#[test]
fn a_skipped_step_becomes_a_note_in_its_section() {
    let (_tmp, run) = common::fixture_copy();
    fs::remove_file(run.join("profile/profile.json")).unwrap();
    fs::remove_file(run.join("sanitize/sanitize.json")).unwrap();
    edit_json(&run.join("lab.json"), |v| {
        for s in v["steps"].as_array_mut().unwrap() {
            if s["name"] == "profile" {
                s["status"] = "skipped".into();
                s["detail"] = "ncu not found (looked in PATH and /usr/local/cuda/bin)".into();
                s["artifacts"] = serde_json::json!([]);
            }
        }
        v["steps"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["name"] != "sanitize");
    });
    let data = load(&run).unwrap();
    let note = "not in this run: step 'profile' was skipped: ncu not found (looked in PATH and /usr/local/cuda/bin)";
    assert_eq!(data.profile.as_ref().unwrap_err().0, note);
    assert_eq!(
        data.sanitize.as_ref().unwrap_err().0,
        "not in this run: lab.json has no 'sanitize' step and there is no sanitize/sanitize.json"
    );
    let r = render(&data);
    assert!(r.html.contains(&klab_report_escape(note)));
    assert!(r.markdown.contains(note));
    assert!(r
        .html
        .contains("counters.svg not drawn: not in this run: step &#39;profile&#39; was skipped"));
    assert!(plot(&r, "counters.svg").contains("not in this run"));
    // The other plots still draw.
    assert!(plot(&r, "rounds.svg").contains(&format!(
        "#{:02X}{:02X}{:02X}",
        plots::ROUNDS_BLOCK.0,
        plots::ROUNDS_BLOCK.1,
        plots::ROUNDS_BLOCK.2
    )));
}

#[test]
fn a_run_without_a_gpu_renders_with_notes_and_no_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let skipped = "no CUDA device: correctness and timing gates need a GPU";
    let steps: Vec<serde_json::Value> = ["ladder", "benchmark", "rounds", "receipts"]
        .iter()
    .map(
        |n| serde_json::json!({"name": n, "status": "skipped", "detail": skipped, "artifacts": []}),
    )
    .collect();
    let lab = serde_json::json!({
        "klab_version": "0.1.0",
        "command": ["klab", "lab"],
        "started_utc": "2026-11-30T00:00:00Z",
        "finished_utc": "2026-11-30T00:00:01Z",
        "device": null,
        "steps": steps,
        "artifacts": [{"path": "model.json", "bytes": 2, "sha256": "00"}, {"path": "../etc/passwd", "bytes": 1, "sha256": "00"}]
    });
    fs::write(tmp.path().join("lab.json"), lab.to_string()).unwrap();
    fs::write(
        tmp.path().join("environment.json"),
        r#"{"device": null, "device_error": "CUDA driver not found"}"#,
    )
    .unwrap();
    let data = load(tmp.path()).unwrap();
    assert_eq!(
        data.device.as_ref().unwrap_err().0,
        "no device: CUDA driver not found"
    );
    let want = format!("not in this run: step 'ladder' was skipped: {skipped}");
    assert_eq!(data.ladder.as_ref().unwrap_err().0, want);
    for note in [
        &data.rounds.as_ref().unwrap_err().0,
        &data.round_blocks.as_ref().unwrap_err().0,
    ] {
        assert!(note.contains("step 'rounds' was skipped"), "{note}");
    }
    let r = render(&data);
    assert!(r.html.contains(&klab_report_escape(&want)));
    assert!(r.markdown.contains(&want));
    // Why there is no device is said once, in the Device fact, not again for each figure
    // that needs one (a CPU-only lab's report once repeated it five times).
    assert_eq!(
        r.markdown.matches("CUDA driver not found").count(),
        1,
        "{}",
        r.markdown
    );
    assert!(r
        .markdown
        .contains("**Theoretical peak:** unknown: no device in this run"));
    for (name, svg) in &r.plots {
        assert!(svg.starts_with("<svg"), "{name}");
    }
    for name in ["bandwidth.svg", "rounds.svg", "roofline.svg"] {
        assert!(not_drawn(&r.html, name), "{name}");
        assert!(not_drawn(&r.markdown, name), "{name}");
    }
    use klab_report::data::ArtifactStatus;
    assert_eq!(data.artifacts[0].status, ArtifactStatus::Missing);
    assert!(matches!(
        data.artifacts[1].status,
        ArtifactStatus::Refused(_)
    ));
    assert!(r
        .html
        .contains("not opened: the path has a &#39;..&#39; component"));
}

/// Whether a note in `text` says that plots/`name` was not drawn.
fn not_drawn(text: &str, name: &str) -> bool {
    text.lines()
        .any(|l| l.contains(&format!("plots/{name}")) && l.contains("not drawn"))
}

#[test]
fn an_unreadable_artifact_is_a_note_and_a_changed_one_is_flagged() {
    let (_tmp, run) = common::fixture_copy();
    fs::write(run.join("rounds/summary.json"), "not json\n").unwrap();
    let data = load(&run).unwrap();
    let note = data.rounds.as_ref().unwrap_err().0.clone();
    assert!(
        note.starts_with("could not read rounds/summary.json: "),
        "{note}"
    );
    let r = render(&data);
    assert!(r.html.contains(&klab_report_escape(&note)));
    // No rates, no ceiling, no bars: each says why, and nothing is recomputed from the
    // blocks (rounds/rounds.csv still reads, so the per-round plot still draws).
    assert!(r.markdown.contains(&format!("> **Note:** {note}")));
    // The plot drawn from it says so without saying the note again.
    let line = r
        .markdown
        .lines()
        .find(|l| l.contains("plots/bandwidth.svg"))
        .unwrap();
    assert!(
        line.starts_with("> **Note:**") && line.ends_with("not drawn, for the reason above"),
        "{line}"
    );
    assert_eq!(
        metrics::peaks(&data).ceiling_basis,
        format!("unknown: {note}")
    );
    assert!(plot(&r, "rounds.svg").contains("block range"));
    let changed = data
        .artifacts
        .iter()
        .find(|a| a.path == "rounds/summary.json")
        .unwrap();
    assert!(matches!(
        changed.status,
        klab_report::data::ArtifactStatus::Mismatch { .. }
    ));
    assert!(r.html.contains("CHANGED: sha256 now"));
}

fn klab_report_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[test]
fn markup_in_kernel_names_is_escaped_everywhere() {
    let evil = "<script>alert(1)</script>";
    let (_tmp, run) = common::fixture_copy();
    edit_json(&run.join("profile/profile.json"), |v| {
        v["kernels"][0]["kernel"] = evil.into();
        v["kernels"][0]["bound"]["hypothesis"] = format!("{evil} & more").into();
    });
    edit_json(&run.join("sanitize/sanitize.json"), |v| {
        v[0]["kernel"] = evil.into();
    });
    edit_json(&run.join("lab.json"), |v| {
        v["steps"][0]["detail"] = evil.into();
    });
    let r = render(&load(&run).unwrap());
    assert!(!r.html.to_lowercase().contains("<script"));
    assert!(r.html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!r.markdown.contains("<script"));
    assert!(r.markdown.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    for (name, svg) in &r.plots {
        assert!(!svg.contains("<script"), "{name}");
    }
    assert!(plot(&r, "counters.svg").contains("&lt;script&gt;"));
}

#[test]
fn disagreements_are_flagged_in_the_table_and_the_plot() {
    // The fixture's real counters disagree once (padded: 60,958 shared load bank conflicts
    // where the model predicts none); plant one more on tiled: its measured conflicts
    // beside the padded kernel's prediction (zero), as bound.rs's own test does.
    let p = predict(Variant::Padded, 4096, TILE, BLOCK_ROWS).unwrap();
    let m = Measured {
        shared_load_conflicts: Some(16_488_054.0),
        shared_store_conflicts: Some(0.0),
        ..Default::default()
    };
    let rows = compare(Some(&p), &m);
    let planted = rows
        .iter()
        .filter(|r| r.agreement == Agreement::Disagrees)
        .count();
    assert!(planted > 0);
    let (_tmp, run) = common::fixture_copy();
    let path = run.join("profile/profile.json");
    let mut profile: ProfileRecord =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let real = plots::counters(&profile.kernels).svg;
    let tiled = profile
        .kernels
        .iter()
        .position(|k| k.kernel == "tiled")
        .unwrap();
    profile.kernels[tiled].counters = rows;
    let flagged = plots::counters(&profile.kernels).svg;
    let red = format!(
        "#{:02X}{:02X}{:02X}",
        plots::DISAGREE.0,
        plots::DISAGREE.1,
        plots::DISAGREE.2
    );
    // The legend draws the mark once; each disagreement adds one.
    assert_eq!(real.matches(&red).count(), 2);
    assert_eq!(flagged.matches(&red).count(), 2 + planted);

    let r = render(&load(&run).unwrap());
    assert!(r.html.contains("<td class=\"bad\">DISAGREES</td>"));
    assert!(r.html.contains(
        "padded: the measurement DISAGREES with the address model for shared load bank conflicts"
    ));
    fs::write(&path, serde_json::to_string_pretty(&profile).unwrap()).unwrap();
    let r = render(&load(&run).unwrap());
    assert!(r.html.contains(
        "tiled: the measurement DISAGREES with the address model for shared load bank conflicts"
    ));
    assert!(r.markdown.contains("**DISAGREES**"));
}

#[test]
fn every_performance_number_sits_beside_a_verdict() {
    let r = render(&load(&common::fixture()).unwrap());
    let md = &r.markdown;
    // Each ratio of the rounds sits beside the kernel's verdict from every gate.
    for (v, ratio) in [
        ("copy", "5.396x"),
        ("tiled", "3.219x"),
        ("padded", "6.344x"),
    ] {
        let verdict = format!("| {v} | pass: ladder 7/7 sizes; rounds 10/10 blocks correct; sanitizer clean (3 tools) | naive | {ratio} |");
        assert!(
            md.lines().any(|l| l.starts_with(&verdict)),
            "no row with both the verdict and the ratio {ratio} for {v}"
        );
    }
    assert!(md.contains(
        "| broken | known broken, rejected: 4,419,284 mismatches; not timed | n/a | n/a | n/a | n/a |"
    ));
    assert!(
        md.contains("0 failures against CPU double FMA, one cast to float, rechecked after timing")
    );
    // Each rate of the rounds sits beside the kernel's verdict.
    for (k, gb_s) in [("copy", "2,651.3"), ("padded", "3,116.1")] {
        let verdict = format!(
            "| {k} | pass: ladder 7/7 sizes; rounds 10/10 blocks correct; sanitizer clean (3 tools) | 10 |"
        );
        assert!(
            md.lines()
                .any(|l| l.starts_with(&verdict) && l.contains(&format!("| {gb_s} |"))),
            "no row with both the verdict and {gb_s} GB/s for {k}"
        );
    }
}

#[test]
fn not_a_run_folder_is_a_one_line_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let e = load(tmp.path()).unwrap_err();
    assert!(matches!(e, ReportError::NotARun(_)));
    let msg = e.to_string();
    assert_eq!(msg.lines().count(), 1);
    assert!(
        msg.contains(&tmp.path().display().to_string()) && msg.contains("no lab.json"),
        "{msg}"
    );
    let missing = tmp.path().join("nope");
    let msg = load(&missing).unwrap_err().to_string();
    assert!(
        msg.contains("nope") && msg.contains("is not a folder"),
        "{msg}"
    );
    fs::write(tmp.path().join("lab.json"), "{\"steps\": 5}").unwrap();
    let msg = load(tmp.path()).unwrap_err().to_string();
    assert!(msg.contains("is not a klab lab record"), "{msg}");
    assert_eq!(msg.lines().count(), 1);
}

#[test]
fn write_puts_every_file_under_report_atomically() {
    let (_tmp, run) = common::fixture_copy();
    let r = render(&load(&run).unwrap());
    let written = klab_report::write(&run, &r).unwrap();
    let rel: Vec<String> = written
        .iter()
        .map(|p| p.strip_prefix(&run).unwrap().display().to_string())
        .collect();
    assert_eq!(
        rel,
        [
            "report/index.html",
            "report/report.md",
            "report/plots/bandwidth.svg",
            "report/plots/rounds.svg",
            "report/plots/roofline.svg",
            "report/plots/counters.svg"
        ]
    );
    assert_eq!(fs::read_to_string(&written[0]).unwrap(), r.html);
    assert_eq!(fs::read_to_string(&written[1]).unwrap(), r.markdown);
    for (name, svg) in &r.plots {
        assert_eq!(
            &fs::read_to_string(run.join("report/plots").join(name)).unwrap(),
            svg
        );
    }
    // No temporary file is left behind.
    for dir in [run.join("report"), run.join("report/plots")] {
        for e in fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "left {name}");
        }
    }
    // Writing again replaces the files and a report of the report's run still loads.
    klab_report::write(&run, &r).unwrap();
    assert!(load(&run).is_ok());
}

#[test]
fn hostile_values_render_without_a_panic() {
    let (_tmp, run) = common::fixture_copy();
    edit_json(&run.join("rounds/summary.json"), |v| {
        v["rates"] = serde_json::json!([
            {"kernel": "copy", "blocks": 2, "blocks_passed": 1, "median_us": 0.0,
             "median_gb_s": 0.0, "pct_of_ceiling": 0.0, "pct_of_peak": 1e300},
            {"kernel": "tiled", "blocks": 1, "blocks_passed": 3, "median_gb_s": -5.0},
            {"kernel": "<b>nope</b>"}
        ]);
        v["ceiling"] = serde_json::json!({"kernel": "copy", "gb_s": 0.0});
    });
    fs::write(
        run.join("rounds/rounds.csv"),
        "round,position,variant,correct,samples,median_us,p10_us,p90_us,useful_gb_s,flags\n\
         1,0,copy,true,1,0,0,0,0,\"\"\n1,1,copy,false,1,1,1,1,1,\"clock changed\"\n",
    )
    .unwrap();
    edit_json(&run.join("profile/profile.json"), |v| {
        v["kernels"][0]["counters"][4]["measured"] = serde_json::json!(-3.0);
        v["kernels"][1]["counters"][4]["measured"] = serde_json::json!(1e300);
        v["kernels"][3]["absent_metrics"] =
            serde_json::json!(["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]);
    });
    let r = render(&load(&run).unwrap());
    for (name, svg) in &r.plots {
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
    }
    assert!(r.html.contains("round 1 copy (clock changed)"));
    assert!(r.html.contains("padded: metrics asked for but absent from the Nsight Compute report: l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"));
    // A non-finite number in a CSV makes the file a note rather than a number.
    fs::write(
        run.join("rounds/rounds.csv"),
        "round,position,variant,correct,samples,median_us\n1,0,copy,true,1,NaN\n",
    )
    .unwrap();
    let data = load(&run).unwrap();
    assert!(data
        .round_blocks
        .as_ref()
        .unwrap_err()
        .0
        .contains("median_us is not a finite number: 'NaN'"));
    render(&data);
}

/// The ceilings step's rounds (issue 6): rates, % of the fastest copy, % of peak and the
/// ratio against cuBLAS, each beside its blocks' validation. The summary is the H200's
/// (evidence/2026-11-30-fast/run-b/rounds-8192/summary.json) with block counts added.
#[test]
fn ceilings_table_sets_each_rate_beside_its_validation_and_ratio() {
    let (_tmp, run) = common::fixture_copy();
    let before = render(&load(&run).unwrap());
    assert!(before.markdown.contains("ceilings/summary.json"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../evidence/2026-11-30-fast/run-b/rounds-8192/summary.json");
    fs::create_dir_all(run.join("ceilings")).unwrap();
    fs::copy(&src, run.join("ceilings/summary.json")).unwrap();
    edit_json(&run.join("ceilings/summary.json"), |v| {
        for r in v["rates"].as_array_mut().unwrap() {
            let failed = r["kernel"] == "padded";
            r["blocks"] = 10.into();
            r["blocks_passed"] = if failed { 9 } else { 10 }.into();
        }
    });
    let md = render(&load(&run).unwrap()).markdown;
    let at = md.find("Ceilings and the library baseline").unwrap();
    let md = &md[at..];
    let row = |k: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {k} | ")) && l.contains("blocks"))
            .unwrap_or_else(|| panic!("no {k} row in\n{md}"))
            .to_string()
    };
    let t2 = row("vec4\\_t2");
    assert!(t2.contains("pass: 10/10 blocks validated"), "{t2}");
    assert!(t2.contains("91.2"), "{t2}");
    assert!(t2.contains("1.01"), "{t2}");
    assert!(row("sgeam").contains("baseline"));
    assert!(row("padded").contains("FAIL: 9/10 blocks passed"));
    assert!(
        !md.contains("written before measuring"),
        "no prediction, no column"
    );

    // A manifest's prediction is set beside the outcome; kernels without one get "-".
    edit_json(&run.join("ceilings/summary.json"), |v| {
        for r in v["rates"].as_array_mut().unwrap() {
            if r["kernel"] == "vec4_t2" {
                r["prediction"] = "3,650-3,800 GB/s at 8192, about sgeam's level".into();
            }
        }
    });
    let md = render(&load(&run).unwrap()).markdown;
    let md = &md[md.find("Ceilings and the library baseline").unwrap()..];
    assert!(md.contains("| prediction (manifest, written before measuring) |"));
    let t2 = md
        .lines()
        .find(|l| l.starts_with("| vec4\\_t2 | "))
        .unwrap();
    assert!(
        t2.ends_with("| 3,650-3,800 GB/s at 8192, about sgeam's level |"),
        "{t2}"
    );
    let sg = md.lines().find(|l| l.starts_with("| sgeam | ")).unwrap();
    assert!(sg.ends_with("| baseline | - |"), "{sg}");
}

/// The rounds subsection: one heading, the rates of rounds/summary.json beside each
/// kernel's verdict and its blocks' range, then the ratios; without rates, a note.
#[test]
fn rounds_table_shows_the_writers_rates_with_the_block_range() {
    let (_tmp, old) = fixture_without_rates();
    let md = render(&load(&old).unwrap()).markdown;
    assert_eq!(
        md.matches("### Alternating rounds (rounds/summary.json)")
            .count(),
        1
    );
    assert!(md.contains(
        "> **Note:** rounds/summary.json has no rates (written by a klab older than the ceilings step)"
    ));
    let md = render(&load(&common::fixture()).unwrap()).markdown;
    let at = md
        .find("### Alternating rounds (rounds/summary.json)")
        .unwrap();
    let end = md.find("### Single-process benchmark").unwrap();
    let section = &md[at..end];
    assert!(section.contains("| kernel | correctness | blocks | median us | median GB/s | p10 - p90 GB/s over blocks | % of ceiling | % of peak |"));
    let row = |k: &str| {
        section
            .lines()
            .find(|l| l.starts_with(&format!("| {k} | ")))
            .unwrap_or_else(|| panic!("no {k} row in\n{section}"))
            .to_string()
    };
    // summary.json's median us, GB/s and shares; the p10-p90 of padded's ten blocks.
    assert_eq!(
        row("padded"),
        "| padded | pass: ladder 7/7 sizes; rounds 10/10 blocks correct; sanitizer clean (3 tools) | 10 | 43.072 | 3,116.1 | 3,101.3 - 3,126.7 | 117.5% | 64.7% |"
    );
    assert!(row("naive").contains("| 18.5% | 10.2% |"));
    // The ratios against the baseline follow in the same subsection.
    assert!(section.contains("| candidate | correctness | baseline | ratio |"));
    assert!(section.contains("ceiling is the fastest copy kernel in the same rounds"));
    for word in ["harness", "seed", "Timing engine"] {
        assert!(!md.contains(word), "the report says '{word}'");
    }
}

/// The receipts table says whether `klab compare` takes each receipt: one with the integrity
/// section today's engine writes is taken; the fixture's others (written before it) are
/// refused, with the reason in a note that names the receipt once; one whose sample file is
/// gone does not check.
#[test]
fn the_receipts_table_says_whether_compare_takes_each_receipt() {
    let (_tmp, run) = common::fixture_copy();
    let path = run.join("benchmark/copy/receipt.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let rates = klab_core::floor::DeviceRates {
        hbm_gb_s: v["hardware"]["theoretical_peak_gb_s"].as_f64().unwrap(),
        l2_measured_gb_s: 9000.0,
        l2_method: "test".into(),
        l2_bytes: v["hardware"]["l2_bytes"].as_u64().unwrap(),
        peak_ops_per_s: None,
        ops_method: "test".into(),
    };
    let floor = klab_core::floor::Floor::of(
        v["workload"]["useful_bytes_per_launch"].as_u64().unwrap(),
        v["workload"]["flops_per_launch"].as_u64().unwrap(),
        &rates,
    );
    let median = v["result"]["median_us"].clone();
    let policy = klab_core::samples::Invalidation::EveryLaunch;
    v["integrity"] = serde_json::json!({
        "invalidation": policy,
        "policy": policy.describe(),
        "slots_per_sample": 1,
        "verified_samples": 4,
        "floor": floor,
        "checked_median_us": median,
        "checked_launches": 4,
        "probe_median_us": median,
        "probe_invalidated_median_us": median,
        "probes": 4,
        "flags": [],
    });
    fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    fs::remove_file(
        run.join("benchmark/naive").join(
            fs::read_dir(run.join("benchmark/naive"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .find(|n| n.to_string_lossy().starts_with("samples"))
                .unwrap(),
        ),
    )
    .unwrap();
    let md = render(&load(&run).unwrap()).markdown;
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}: {md}"))
            .to_string()
    };
    assert!(
        row("benchmark/copy/receipt.json").ends_with("| takes it |"),
        "{md}"
    );
    assert!(
        row("benchmark/tiled/receipt.json").ends_with("| refuses it (below) |"),
        "{md}"
    );
    assert!(
        md.contains("klab compare refuses receipt benchmark/tiled/receipt.json: it lacks"),
        "{md}"
    );
    assert!(
        md.contains("klab compare cannot check receipt benchmark/naive/receipt.json: artifact"),
        "{md}"
    );
}
