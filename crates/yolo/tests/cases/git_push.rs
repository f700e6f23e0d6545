//! The push rules of a forge (`[http."FORGE"] git_push`, issue 25) against a real git
//! smart-HTTP server: Apache running `git http-backend` over HTTPS with a CA of the test's own
//! (given to yolo as `extra_ca`), hosting the workspace's `origin` (`o/r.git`) and another
//! repository (`x/other.git`), both open to pushes by a Basic-authenticated user whose password
//! is the real value of a `[credentials.forge]`. The agent, root in its container, uses real
//! `git` with a credential helper that hands out its stand-in: every clone and push that the
//! server accepts proves the guard put the real value in. What the rules refuse must never reach
//! the server: its bare repositories and its request log are checked after each run.

use crate::support::net::*;
use crate::support::*;
use std::time::Duration;

/// Apache + git (the server), and git + curl (the agent): one image for both.
const GIT_IMAGE: &str = "yolo-test-git-http:1";

/// The forge's name, answered with the server's address by the test's name server.
const FORGE: &str = "forge.allowed.test";

/// A CA of the server's own and a leaf for [`FORGE`]: `ca.pem`, `server.pem`, `server.key`.
fn server_certificates(dir: &std::path::Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "yolo git push test forge CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca = params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(params, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![FORGE.to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

/// The server's start: Apache with `git http-backend` as CGI on 443, every request behind
/// Basic authentication (user `x`, password `$FORGE_REAL`; an authenticated user may push, as
/// http-backend enables receive-pack for one), each request logged as a `REQ` line; the two
/// bare repositories with one commit on `main`.
const SERVER: &str = r#"set -e
cat > /etc/apache2/sites-enabled/git.conf <<'CONF'
ServerName forge
<VirtualHost *:443>
  SSLEngine on
  SSLCertificateFile /certs/server.pem
  SSLCertificateKeyFile /certs/server.key
  SetEnv GIT_PROJECT_ROOT /srv/git
  SetEnv GIT_HTTP_EXPORT_ALL 1
  ScriptAlias / /usr/lib/git-core/git-http-backend/
  <Location />
    AuthType Basic
    AuthName forge
    AuthUserFile /srv/htpasswd
    Require valid-user
  </Location>
  LogFormat "REQ %m %U%q %>s user=%u" req
  CustomLog /proc/self/fd/1 req
</VirtualHost>
CONF
htpasswd -bc /srv/htpasswd x "$FORGE_REAL" 2>/dev/null
export HOME=/tmp
git config --global user.email forge@test
git config --global user.name forge
git init -q -b main /tmp/seed
echo seed > /tmp/seed/README
git -C /tmp/seed add README
git -C /tmp/seed commit -qm seed
for repo in o/r x/other; do
  git init -q --bare -b main /srv/git/$repo.git
  git -C /tmp/seed push -q /srv/git/$repo.git main
done
chown -R www-data: /srv/git
echo ready
exec apache2ctl -D FOREGROUND
"#;

/// A forge server on the test's internet, [`FORGE`] answered with its address.
struct Forge {
    name: String,
    /// Holds the certificates the server reads (and the CA yolo is given).
    certs: tempfile::TempDir,
}

impl Forge {
    fn start(t: &Test, net: &Internet, real: &str) -> Forge {
        ensure_image(GIT_IMAGE, "git-http.Dockerfile");
        let certs = tempfile::tempdir().unwrap();
        server_certificates(certs.path());
        let name = format!("yolo-{}-forge", t.id);
        docker_ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &format!("{LABEL}={}", t.id),
            "--network",
            &net.network,
            "-e",
            &format!("FORGE_REAL={real}"),
            "-v",
            &format!("{}:/certs:ro", certs.path().display()),
            GIT_IMAGE,
            "sh",
            "-c",
            SERVER,
        ]);
        let forge = Forge { name, certs };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !docker(&["logs", &forge.name]).contains("ready") {
            assert!(
                std::time::Instant::now() < deadline,
                "the forge never started: {}",
                docker(&["logs", &forge.name])
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        net.set_answer(FORGE, &ip_of(&forge.name, &net.network));
        forge
    }

    fn ca(&self) -> String {
        self.certs.path().join("ca.pem").display().to_string()
    }

    /// The refs of `repo` (`o/r`) on the server: `refname oid` lines, sorted.
    fn refs(&self, repo: &str) -> Vec<String> {
        docker_ok(&[
            "exec",
            "-u",
            "www-data",
            &self.name,
            "git",
            "-C",
            &format!("/srv/git/{repo}.git"),
            "for-each-ref",
            "--format=%(refname) %(objectname)",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// The oid of `refname` in `repo`, if it exists.
    fn oid(&self, repo: &str, refname: &str) -> Option<String> {
        self.refs(repo)
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{refname} ")).map(str::to_string))
    }

    /// The requests the server received, as `METHOD PATH?QUERY STATUS user=U`.
    fn requests(&self) -> Vec<String> {
        docker(&["logs", &self.name])
            .lines()
            .filter_map(|l| l.strip_prefix("REQ "))
            .map(str::to_string)
            .collect()
    }
}

/// A session on the forge: the workspace is a git repository whose `origin` is `o/r` on the
/// forge (from which yolo takes the push rule's repository), the user config has the forge's
/// CA, its credential and `[http."FORGE"] git_push` (`refs`: none, the default), and the agent
/// `probe` runs `script` (after [`GIT_SETUP`]). Returns the test, the forge and the run.
fn run_on_forge(refs: Option<&str>, script: &str) -> (Test, Internet, Forge, Run, String) {
    let mut t = Test::new();
    let net = Internet::new(&t);
    let real = format!("forge-real-{}-0123456789abcdef", t.id);
    let forge = Forge::start(&t, &net, &real);
    t.env("YOLO_TEST_FORGE_TOKEN", &real);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&t.workspace)
            .args(args)
            .output()
            .expect("git on the host");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "remote",
        "add",
        "origin",
        &format!("https://{FORGE}/o/r.git"),
    ]);
    t.devcontainer(&format!(r#"{{"image": "{GIT_IMAGE}"}}"#));
    let push = match refs {
        None => "git_push = {}".to_string(),
        Some(refs) => format!("git_push = {{ refs = [\"{refs}\"] }}"),
    };
    t.user_config(&net.user_config(&format!(
        r#"extra_ca = ["{ca}"]
[credentials.forge]
hosts = ["{FORGE}"]
header = "authorization"
from_env = "YOLO_TEST_FORGE_TOKEN"
agent_env = "FORGE_TOKEN"
[http."{FORGE}"]
{push}
[agents.probe]
command = ["sh", "-c", {script}]
"#,
        ca = forge.ca(),
        script = serde_json::to_string(&format!("{GIT_SETUP}{script}\necho done\n")).unwrap(),
    )));
    let mut args = vec!["run".to_string(), "probe".to_string()];
    args.extend(net.up_flags(&[FORGE]));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = t.yolo(&refs);
    let out = run.stdout();
    assert!(out.contains("\ndone"), "{}", run.describe());
    (t, net, forge, run, real)
}

/// The agent's git: a credential helper that answers with the stand-in the agent was handed
/// (`FORGE_TOKEN`), and `try NAME CMD...`, which runs a command and prints `NAME=ok|failed`
/// then its output, each line prefixed `NAME| `. It clones origin into /tmp/r and makes a
/// commit there on top of origin's `main` (so a push to `main` is a fast-forward that the
/// client itself would not hold back).
const GIT_SETUP: &str = r#"export HOME=/tmp/home
mkdir -p $HOME
git config --global user.email agent@test
git config --global user.name agent
git config --global credential.helper '!f() { test "$1" = get && printf "username=x\npassword=%s\n" "$FORGE_TOKEN"; }; f'
echo "stand-in=$FORGE_TOKEN"
F=https://forge.allowed.test
try() {
  name=$1; shift
  if "$@" > /tmp/$name.log 2>&1; then echo "$name=ok"; else echo "$name=failed"; fi
  sed "s/^/$name| /" /tmp/$name.log
}
try clone-origin git clone -q $F/o/r.git /tmp/r
cd /tmp/r
echo work > work && git add work && git commit -qm work
echo "head=$(git rev-parse HEAD)"
"#;

/// The answer of `name=` in the agent's output.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in the agent's output:\n{out}"))
        .trim()
}

/// What the command `name` printed (its lines, without the prefix).
fn output_of(out: &str, name: &str) -> String {
    out.lines()
        .filter_map(|l| l.strip_prefix(&format!("{name}| ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// ATTACK: root in the agent container, with real git, tries to push where the default rule
/// does not let it: `main` of origin, a push that carries `yolo/mixed` and `main` in one
/// request, a forced update and a deletion of `main`, and any ref of another repository on the
/// same forge. All refused by the guard before the server sees the push (its repositories are
/// unchanged, its log holds no receive-pack request for them), with the guard's 403 naming the
/// rule. Fetches from both repositories, a push to `refs/heads/yolo/x`, a forced one there, and
/// a push too big for git's post buffer (git probes with an empty command list first) are
/// accepted, with the real credential, which the agent never holds, put in by the guard.
#[test]
fn git_pushes_go_only_to_origin_and_to_yolo_refs_against_a_real_forge() {
    let script = r#"try clone-other git clone -q $F/x/other.git /tmp/other
try push-yolo git push origin HEAD:refs/heads/yolo/x
try push-main git push origin HEAD:refs/heads/main
try push-mixed git push origin HEAD:refs/heads/yolo/mixed HEAD:refs/heads/main
try push-other git push $F/x/other.git HEAD:refs/heads/yolo/x
git checkout -q --orphan lone && git commit -qm lone
try force-main git push --force origin HEAD:refs/heads/main
try force-yolo git push --force origin HEAD:refs/heads/yolo/x
try delete-main git push origin --delete main
git checkout -q -B big origin/main
head -c 1500000 /dev/urandom > big && git add big && git commit -qm big
echo "big=$(git rev-parse HEAD)"
try push-big git push origin HEAD:refs/heads/yolo/big
echo "lone=$(git rev-parse lone)""#;
    let (t, _net, forge, run, real) = run_on_forge(None, script);
    let out = run.stdout();
    let seed = forge
        .oid("x/other", "refs/heads/main")
        .expect("other's main");

    // The agent holds a stand-in; the server, which checks the real password, let it in.
    let stand_in = field(&out, "stand-in");
    assert!(!stand_in.is_empty() && stand_in != real, "{out}");
    assert!(!out.contains(&real), "the real value reached the agent");
    assert_eq!(field(&out, "clone-origin"), "ok", "{out}");
    assert_eq!(field(&out, "clone-other"), "ok", "{out}");

    // Accepted: yolo/x (then forced to another history), and the big push.
    assert_eq!(field(&out, "push-yolo"), "ok", "{out}");
    assert_eq!(field(&out, "force-yolo"), "ok", "{out}");
    assert_eq!(field(&out, "push-big"), "ok", "{out}");
    assert_eq!(
        forge.oid("o/r", "refs/heads/yolo/x").as_deref(),
        Some(field(&out, "lone")),
        "{out}"
    );
    assert_eq!(
        forge.oid("o/r", "refs/heads/yolo/big").as_deref(),
        Some(field(&out, "big")),
        "{out}"
    );

    // Refused, and the server unchanged: main of origin as seeded, no yolo/mixed (the allowed
    // half of the mixed push went nowhere either), the other repository untouched.
    for name in [
        "push-main",
        "push-mixed",
        "push-other",
        "force-main",
        "delete-main",
    ] {
        assert_eq!(field(&out, name), "failed", "{name}:\n{out}");
        let said = output_of(&out, name);
        assert!(said.contains("403"), "{name}: {said}");
    }
    assert_eq!(
        forge.oid("o/r", "refs/heads/main").as_deref(),
        Some(seed.as_str())
    );
    assert_eq!(forge.oid("o/r", "refs/heads/yolo/mixed"), None);
    assert_eq!(
        forge.refs("x/other"),
        vec![format!("refs/heads/main {seed}")]
    );
    // The refusal is the guard's: for the other repository, git shows its text (the refs
    // advertisement is refused); every refusal is in the audit with the rule that decided.
    let other = output_of(&out, "push-other");
    assert!(
        other.contains("Refused by yolo's guard.")
            && other.contains(&format!("rule: http.\"{FORGE}\".git_push"))
            && other.contains("not to /x/other"),
        "{other}"
    );
    // Nothing of a refused push reached the server: no receive-pack for the other repository;
    // for origin, exactly the accepted pushes' requests (the probe, the big one, yolo/x twice).
    let requests = forge.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.contains("/x/other.git/") && r.contains("receive-pack")),
        "{requests:#?}"
    );
    let posts = requests
        .iter()
        .filter(|r| r.starts_with("POST /o/r.git/git-receive-pack 200"))
        .count();
    assert_eq!(posts, 4, "{requests:#?}");
    let refused = wait_event(&t, Duration::from_secs(5), |e| {
        e["kind"] == "http" && e["status"] == 403
    });
    assert!(refused.is_some(), "no refused http event: {:?}", t.events());
    let audit = t.yolo(&["audit", "--kind", "http"]).ok().stdout();
    assert!(
        audit.contains(&format!("POST {FORGE}/o/r.git/git-receive-pack -> 403"))
            && audit.contains(&format!(
                "GET {FORGE}/x/other.git/info/refs -> 403 refused by the guard"
            ))
            && audit.contains("credential forge"),
        "{audit}"
    );
    assert!(!audit.contains(&real), "{audit}");
}

/// The user's `refs` replace the default: with `refs/heads/agent/**`, a push to `agent/x` is
/// accepted and one to `yolo/x` refused (the server unchanged).
#[test]
fn git_push_refs_in_the_user_config_decide_which_refs_a_push_may_touch() {
    let script = r#"try push-agent git push origin HEAD:refs/heads/agent/x
try push-yolo git push origin HEAD:refs/heads/yolo/x"#;
    let (_t, _net, forge, run, _real) = run_on_forge(Some("refs/heads/agent/**"), script);
    let out = run.stdout();
    assert_eq!(field(&out, "push-agent"), "ok", "{out}");
    assert_eq!(field(&out, "push-yolo"), "failed", "{out}");
    assert!(output_of(&out, "push-yolo").contains("403"), "{out}");
    assert_eq!(
        forge.oid("o/r", "refs/heads/agent/x").as_deref(),
        Some(field(&out, "head"))
    );
    assert_eq!(forge.oid("o/r", "refs/heads/yolo/x"), None);
}
