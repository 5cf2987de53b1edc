//! Writes the synthetic Nsight Systems exports that klab's tests use into a folder, so
//! they can be looked at with `klab trace`:
//!
//! ```text
//! cargo run -p klab-tools --example make_nsys_fixtures -- /tmp/nsys-fixtures
//! klab trace /tmp/nsys-fixtures/*.sqlite --bytes-moved 8000000 --peak-gbs 2039
//! ```
//!
//! The files are built by `klab_tools::nsys::testdata` (the same code the tests use) from
//! the DDL of nsys 2022.1, 2022.2, 2024.5 and 2026.1 exports. Existing files of the same
//! names are replaced.

use std::path::PathBuf;
use std::process::ExitCode;

use klab_tools::nsys::testdata;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: make_nsys_fixtures <folder>");
        return ExitCode::from(1);
    };
    let dir = PathBuf::from(dir);
    match testdata::write_all(&dir) {
        Ok(paths) => {
            for (p, f) in paths.iter().zip(testdata::FIXTURES.iter()) {
                println!("{}  ({})", p.display(), f.about);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
