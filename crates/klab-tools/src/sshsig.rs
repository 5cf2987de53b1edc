//! SSH signatures over receipts, so a team can tell whose key (whose machine) produced a
//! receipt: `ssh-keygen -Y sign` and `ssh-keygen -Y verify` (OpenSSH 8.1 and later), under
//! the namespace [`NAMESPACE`] so that a signature made for something else (a git commit, a
//! file) is not accepted as a receipt's. klab does no cryptography of its own: the receipt's
//! bytes go to ssh-keygen on standard input through the one child-process runner, and the
//! signature is what ssh-keygen writes (an armored `SSH SIGNATURE` block).
//!
//! A signature covers the receipt's bytes only; the receipt binds its artifacts by SHA-256,
//! so checking the artifacts (`klab receipt check`, `klab compare`) is a separate step.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use klab_core::artifact::Input;

use crate::process::{self, Captured, ProcessError, RunOptions};

/// The signature namespace (`ssh-keygen -n`) of a klab receipt.
pub const NAMESPACE: &str = "klab-receipt";

/// How long ssh-keygen may take. It needs milliseconds; a key that asks for a passphrase
/// on the terminal would wait forever (the runner gives it no terminal).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Where ssh-keygen usually is when it is not on PATH.
const FALLBACKS: [&str; 2] = ["/usr/bin/ssh-keygen", "/usr/local/bin/ssh-keygen"];

/// Why a receipt could not be signed or verified. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum SigError {
    #[error("ssh-keygen not found on PATH or in /usr/bin: install OpenSSH's client tools (e.g. the openssh-client package) or pass --ssh-keygen PATH")]
    Missing,
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("ssh-keygen -Y {action} was still running after {} s and was killed (a key that asks for a passphrase? load it into ssh-agent and pass its public key)", TIMEOUT.as_secs())]
    TimedOut { action: &'static str },
    /// ssh-keygen could not sign (no such key, a key file others can read, ...).
    #[error("ssh-keygen -Y sign with key {} failed ({status}): {message}", .key.display())]
    Sign {
        key: PathBuf,
        status: String,
        message: String,
    },
    #[error("ssh-keygen -Y sign exited 0 but wrote no signature")]
    Empty,
    /// ssh-keygen ran and did not accept the signature for the identity: a failed gate.
    #[error("{} is not signed by {identity} under namespace {NAMESPACE} (signature {}, allowed signers {}): {message}", .file.display(), .signature.display(), .allowed_signers.display())]
    Rejected {
        file: PathBuf,
        signature: PathBuf,
        allowed_signers: PathBuf,
        identity: String,
        message: String,
    },
}

/// The ssh-keygen binary: `explicit` if given, else PATH, else its usual places.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, SigError> {
    let fallbacks: Vec<&Path> = FALLBACKS.iter().map(Path::new).collect();
    process::locate_tool(explicit, "ssh-keygen", &fallbacks).ok_or(SigError::Missing)
}

/// ssh-keygen's own words for a failure: its stderr (else stdout), on one line.
fn tool_message(c: &Captured) -> String {
    let text = if c.stderr.iter().any(|b| !b.is_ascii_whitespace()) {
        &c.stderr
    } else {
        &c.stdout
    };
    let line = String::from_utf8_lossy(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        "no message".to_string()
    } else {
        line
    }
}

fn status(c: &Captured) -> String {
    match (c.exit_code, c.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "no exit status".to_string(),
    }
}

fn args(list: &[&std::ffi::OsStr]) -> Vec<OsString> {
    list.iter().map(|a| a.to_os_string()).collect()
}

/// ssh-keygen with `argv`, `file` (a receipt) on its standard input, under the watchdog;
/// a timeout is an error naming `action`.
fn run_over(
    ssh_keygen: &Path,
    argv: &[OsString],
    file: &Path,
    action: &'static str,
) -> Result<process::Captured, SigError> {
    let opts = RunOptions {
        stdin: Some((file.to_path_buf(), Input::RECEIPT)),
        end_group_on_exit: true,
        ..RunOptions::new(TIMEOUT)
    };
    let c = process::run(ssh_keygen, argv, &opts)?;
    if c.timed_out {
        return Err(SigError::TimedOut { action });
    }
    Ok(c)
}

/// The first bytes of an armored SSH signature, as `ssh-keygen -Y sign` writes it.
pub const ARMOR: &[u8] = b"-----BEGIN SSH SIGNATURE-----";

/// Sign the bytes of `file` (a receipt, at most [`Input::RECEIPT`]'s cap) with `key` (a
/// private key file, or a public key whose private half is in ssh-agent). Returns the
/// armored signature; the caller writes it.
pub fn sign(ssh_keygen: &Path, key: &Path, file: &Path) -> Result<Vec<u8>, SigError> {
    let argv = args(&[
        "-Y".as_ref(),
        "sign".as_ref(),
        "-f".as_ref(),
        key.as_os_str(),
        "-n".as_ref(),
        NAMESPACE.as_ref(),
    ]);
    let c = run_over(ssh_keygen, &argv, file, "sign")?;
    if c.exit_code != Some(0) {
        return Err(SigError::Sign {
            key: key.to_path_buf(),
            status: status(&c),
            message: tool_message(&c),
        });
    }
    if !c.stdout.starts_with(ARMOR) {
        return Err(SigError::Empty);
    }
    Ok(c.stdout)
}

/// Verify `signature` over the bytes of `file` for `identity`, whose keys
/// `allowed_signers` lists (ssh-keygen's ALLOWED SIGNERS format). Returns ssh-keygen's
/// confirmation (`Good "klab-receipt" signature for ID with ED25519 key SHA256:...`).
pub fn verify(
    ssh_keygen: &Path,
    allowed_signers: &Path,
    identity: &str,
    signature: &Path,
    file: &Path,
) -> Result<String, SigError> {
    let argv = args(&[
        "-Y".as_ref(),
        "verify".as_ref(),
        "-f".as_ref(),
        allowed_signers.as_os_str(),
        "-I".as_ref(),
        identity.as_ref(),
        "-n".as_ref(),
        NAMESPACE.as_ref(),
        "-s".as_ref(),
        signature.as_os_str(),
    ]);
    let c = run_over(ssh_keygen, &argv, file, "verify")?;
    if c.exit_code != Some(0) {
        return Err(SigError::Rejected {
            file: file.to_path_buf(),
            signature: signature.to_path_buf(),
            allowed_signers: allowed_signers.to_path_buf(),
            identity: identity.to_string(),
            message: tool_message(&c),
        });
    }
    let said = String::from_utf8_lossy(&c.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&c.stderr).lines())
        .map(str::trim)
        .find(|l| l.starts_with("Good"))
        .map(str::to_string);
    Ok(said.unwrap_or_else(|| format!("Good \"{NAMESPACE}\" signature for {identity}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_one_clear_line() {
        // An explicit path is taken as given; starting it fails naming it.
        let e = sign(
            Path::new("/nonexistent/ssh-keygen"),
            Path::new("k"),
            Path::new("f"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/nonexistent/ssh-keygen") || e.contains("input for"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert!(SigError::Missing.to_string().contains("openssh-client"));
    }
}
