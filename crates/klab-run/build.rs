//! Records the commit klab was built from (`KLAB_BUILD_COMMIT`), so a receipt of a built-in
//! kernel names the source its embedded kernels came from, wherever the binary runs.

fn main() {
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/refs/heads");
    println!("cargo:rerun-if-changed=../../.git/packed-refs");
    let out = std::process::Command::new("git")
        .args([
            "describe",
            "--always",
            "--dirty",
            "--abbrev=40",
            "--match=NO-TAGS",
        ])
        .output();
    if let Ok(o) = out {
        let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() && !text.is_empty() {
            println!("cargo:rustc-env=KLAB_BUILD_COMMIT={text}");
        }
    }
}
