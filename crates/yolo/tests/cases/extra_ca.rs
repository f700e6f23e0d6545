//! The user's extra CA certificates (`--extra-ca`, `extra_ca`): trusted by an image build's RUN
//! steps without the Dockerfile saying so, by the Features' install scripts, and by the running
//! container, recorded by fingerprint in the audit and the approval. A throwaway CA made here
//! with openssl.

use crate::support::*;
use std::process::Command;

/// A new self-signed CA in `<dir>/ca.pem`: its path, PEM text and `sha256:<hex>` fingerprint.
fn throwaway_ca(dir: &std::path::Path) -> (std::path::PathBuf, String, String) {
    let pem = dir.join("ca.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=yolo throwaway test CA",
        ])
        .arg("-keyout")
        .arg(dir.join("ca.key"))
        .arg("-out")
        .arg(&pem)
        .output()
        .expect("openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(&pem)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text
        .trim()
        .rsplit('=')
        .next()
        .unwrap()
        .replace(':', "")
        .to_lowercase();
    let body = std::fs::read_to_string(&pem).unwrap();
    (pem, body, format!("sha256:{hex}"))
}

#[test]
fn builds_features_and_the_container_trust_the_users_ca_and_the_audit_names_it() {
    let t = Test::new();
    let certs = tempfile::tempdir().unwrap();
    let (pem, body, fingerprint) = throwaway_ca(certs.path());
    // The Dockerfile says nothing of the CA: its RUN step finds it, and the variables.
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN cat \"$NODE_EXTRA_CA_CERTS\" > /build-saw.pem && grep -c BEGIN \"$SSL_CERT_FILE\" > /bundle-count\n",
            t.id
        ),
    );
    t.feature(
        "probe",
        r#"{"id": "probe"}"#,
        "cp \"$NODE_EXTRA_CA_CERTS\" /feature-saw.pem",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "features": {"./probe": {}}}"#);
    t.yolo(&["up", "--extra-ca", pem.to_str().unwrap()]).ok();
    for seen in ["/build-saw.pem", "/feature-saw.pem"] {
        t.yolo(&["exec", "cat", seen]).ok().assert_stdout(&body);
    }
    // The image's system store has it too (the bundle, which ends with the extra ones).
    let store = t
        .yolo(&["exec", "cat", "/etc/ssl/certs/ca-certificates.crt"])
        .ok()
        .stdout();
    assert!(
        store.ends_with(&body),
        "the system store lacks the certificate"
    );
    let count: usize = t
        .yolo(&["exec", "cat", "/bundle-count"])
        .ok()
        .stdout()
        .trim()
        .parse()
        .unwrap();
    assert!(
        count >= 1,
        "the bundle holds the extra certificate at least"
    );
    // The running container: the variables and the files, bound read-only.
    t.yolo(&["exec", "sh", "-c", "cat $NODE_EXTRA_CA_CERTS; tail -c 200 $REQUESTS_CA_BUNDLE | grep -c END; touch /usr/local/share/yolo-ca/x 2>/dev/null || echo read-only"])
        .ok()
        .assert_stdout(&format!("{body}1\nread-only\n"));
    // On the session's record and in the approval, by fingerprint.
    let start = t.first_event("session_start").unwrap();
    assert_eq!(
        start["extra_ca"],
        serde_json::json!([fingerprint]),
        "{start}"
    );
    let approvals = std::fs::read_dir(t.data_dir.join("approvals"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    assert!(approvals.contains(&fingerprint), "{approvals}");
}

#[test]
fn a_pulled_image_gets_the_certificates_in_the_container() {
    let t = Test::new();
    let certs = tempfile::tempdir().unwrap();
    let (_, body, _) = throwaway_ca(certs.path());
    // From the config, a folder of them.
    t.user_config(&format!("extra_ca = [\"{}\"]\n", certs.path().display()));
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    t.yolo(&["up"]).ok();
    t.yolo(&[
        "exec",
        "sh",
        "-c",
        "cat $NODE_EXTRA_CA_CERTS; echo $GIT_SSL_CAINFO",
    ])
    .ok()
    .assert_stdout(&format!("{body}/usr/local/share/yolo-ca/bundle.pem\n"));
}

#[test]
fn a_file_that_holds_no_certificate_is_refused_before_anything_is_made() {
    let t = Test::new();
    t.file("not-a-cert.pem", "hello\n");
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    let path = t.workspace.join("not-a-cert.pem");
    t.yolo(&["up", "--extra-ca", path.to_str().unwrap()])
        .fails_with(64)
        .assert_stderr_contains("holds no PEM certificate");
    assert!(t.containers().is_empty());
    t.user_config("extra_ca = [\"/nonexistent/ca.pem\"]\n");
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("\"extra_ca\": /nonexistent/ca.pem");
    assert!(t.containers().is_empty());
}

/// The host's own CA certificates (Debian's folder for them), when it has any.
const HOST_CA: &str = "/usr/local/share/ca-certificates";

/// On a machine whose proxy intercepts TLS (this one): a real RUN step (curl over https, the
/// image's own store) fails on the certificate without the setting, and the error says what is
/// likely wrong and names the flag and the setting; with the host's CA handed over (`--extra-ca`
/// the folder) the same Dockerfile builds.
#[test]
fn a_build_that_fails_on_the_proxys_certificate_says_how_to_hand_yolo_the_ca() {
    if !std::fs::read_dir(HOST_CA).is_ok_and(|mut d| d.next().is_some()) {
        eprintln!("skipped: this machine has no CA of its own in {HOST_CA}");
        return;
    }
    let t = Test::new();
    t.user_config(&mirror_for_builds());
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nRUN echo ca-hint-test\nRUN apt-get update -qq && apt-get install -y -qq --no-install-recommends curl ca-certificates >/dev/null\nRUN curl -sS -o /dev/null https://deb.debian.org/debian/\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("could not verify a TLS certificate")
        .assert_stderr_contains("--extra-ca")
        .assert_stderr_contains("extra_ca = [");
    t.yolo(&["up", "--extra-ca", HOST_CA]).ok();
}
