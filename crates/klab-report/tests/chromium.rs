//! A real headless Chromium renders the fixture report; the screenshot must show every plot (each plot's own
//! series colour in hundreds of pixels) on a page that is not blank.
//!
//! Chromium: `KLAB_CHROMIUM`, else `/usr/bin/chromium`. Without it the test prints
//! "SKIPPED: chromium not found" and passes, unless `KLAB_REQUIRE_CHROMIUM=1`.
//! `KLAB_REPORT_SCREENSHOT=path` keeps a copy of the screenshot there.

mod common;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use klab_report::plots::{Rgb, CHECK_COLOURS};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 4000;
const TIMEOUT: Duration = Duration::from_secs(120);
/// Pixels of a plot's series colour the screenshot must hold.
const MIN_PIXELS: usize = 300;

fn chromium() -> Option<PathBuf> {
    let p = std::env::var_os("KLAB_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    p.is_file().then_some(p)
}

/// Run chromium to screenshot `page` into `shot`, killing it after [`TIMEOUT`].
fn screenshot(chromium: &Path, page: &Path, shot: &Path, profile: &Path) {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            "--hide-scrollbars",
            &format!("--window-size={WIDTH},{HEIGHT}"),
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", page.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting chromium");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            assert!(status.success(), "chromium exited with {status}: {err}");
            return;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {} s", TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// RGB pixels of a PNG.
fn decode(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(BufReader::new(File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "unexpected bit depth");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, pixels)
}

fn close(p: &[u8; 3], c: Rgb) -> bool {
    let d = |a: u8, b: u8| (i16::from(a) - i16::from(b)).abs() <= 2;
    d(p[0], c.0) && d(p[1], c.1) && d(p[2], c.2)
}

#[test]
fn chromium_renders_the_page_with_every_plot() {
    let Some(chromium) = chromium() else {
        if std::env::var("KLAB_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("KLAB_REQUIRE_CHROMIUM=1 but chromium was not found (set KLAB_CHROMIUM or install /usr/bin/chromium)");
        }
        eprintln!("SKIPPED: chromium not found (set KLAB_CHROMIUM or install /usr/bin/chromium)");
        return;
    };
    let (tmp, run) = common::fixture_copy();
    let out = tmp.path().join("report");
    let report = klab_report::render(&klab_report::load(&run).unwrap());
    klab_report::write_into(&out, &report).unwrap();
    let page = out.join("index.html").canonicalize().unwrap();
    let shot = tmp.path().join("shot.png");
    let profile = tempfile::tempdir().unwrap();
    screenshot(&chromium, &page, &shot, profile.path());
    if let Some(keep) = std::env::var_os("KLAB_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    let (w, h, pixels) = decode(&shot);
    assert_eq!((w, h), (WIDTH, HEIGHT));
    // Not blank: most of the page is background, but text, tables and plots cover a
    // sizeable share with many distinct colours.
    let non_white = pixels.iter().filter(|p| p.iter().any(|c| *c < 235)).count();
    assert!(
        non_white > pixels.len() / 50,
        "only {non_white} non-white pixels: the page looks blank"
    );
    let mut distinct: Vec<[u8; 3]> = pixels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 200, "only {} colours", distinct.len());
    for (file, colour) in CHECK_COLOURS {
        let n = pixels.iter().filter(|p| close(p, colour)).count();
        eprintln!("{file}: {n} pixels of rgb{colour:?}");
        assert!(
            n >= MIN_PIXELS,
            "{file}: only {n} pixels of its series colour rgb{colour:?}: the plot did not render"
        );
    }
}

#[test]
fn a_colour_absent_from_the_page_is_not_counted() {
    // The pixel check cannot pass vacuously: a colour used nowhere must count zero.
    let Some(chromium) = chromium() else {
        eprintln!("SKIPPED: chromium not found");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("plain.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body style=\"background:#fff\"><p>no plots here</p></body></html>",
    )
    .unwrap();
    let shot = tmp.path().join("shot.png");
    let profile = tempfile::tempdir().unwrap();
    screenshot(&chromium, &page, &shot, profile.path());
    let (_, _, pixels) = decode(&shot);
    for (file, colour) in CHECK_COLOURS {
        assert_eq!(
            pixels.iter().filter(|p| close(p, colour)).count(),
            0,
            "{file}'s colour found on a page without plots"
        );
    }
}
