//! `cchost --check-args`: the arguments judged as a start would judge them, and nothing opened.

use std::process::Command;

fn check(flags: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cchost"))
        .args(["--host", "1", "--link-mbps", "10", "--check-args"])
        .args(flags)
        .output()
        .expect("cchost runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn good_arguments_pass_without_binding_a_socket() {
    // Outside an emulated host, 10.0.0.1 is no address of ours: a start would fail to bind.
    assert_eq!(check(&["--param", "dcqcn.timer_us=300", "--dilation", "1000"]), (true, String::new()));
}

#[test]
fn a_bad_argument_is_refused_in_one_line_as_a_start_would_refuse_it() {
    let (ok, stderr) = check(&["--param", "dcqcn.timer_us=0"]);
    assert!(!ok);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("dcqcn.timer_us must be microseconds > 0"), "{stderr}");
    let (ok, stderr) = check(&["--schedule", "/nonexistent/schedule"]);
    assert!(!ok && stderr.contains("/nonexistent/schedule"), "{stderr}");
}
