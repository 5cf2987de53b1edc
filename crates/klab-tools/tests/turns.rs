//! A turn given to a child that has already exited is an error the caller handles, also
//! with klab's signal handlers installed (which end klab on SIGPIPE): its own process, so
//! the handlers touch no other test.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use klab_tools::process::{install_signal_handlers, spawn, RunOptions};

#[test]
fn a_turn_given_to_a_child_that_exited_is_an_error_not_a_signal() {
    install_signal_handlers();
    let opts = RunOptions {
        turns: true,
        ..RunOptions::new(Duration::from_secs(30))
    };
    let args: Vec<OsString> = vec!["-c".into(), "exit 3".into()];
    let mut c = spawn(Path::new("/bin/sh"), &args, &opts).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The child is gone (a zombie until waited for): every send fails with EPIPE.
    let mut refused = false;
    for _ in 0..3 {
        refused |= c.give(b'o').is_err();
    }
    assert!(refused, "no error for a turn to an exited child");
    let out = c.wait(Duration::from_secs(5), &mut || {}).unwrap();
    assert_eq!(out.exit_code, Some(3));
}
