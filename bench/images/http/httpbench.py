"""The agent's side of bench/http.sh: for one host, the latency of requests on one kept-alive
HTTPS connection, of requests each on a new TLS connection (a full handshake: no session is
resumed), and the time to the first byte of /stream's body against its whole. Prints one JSON
object (times in microseconds). The client is the same for every host, so what differs between
an inspected and a direct name is the guard's proxy.

usage: httpbench.py HOST KEEPALIVE_REQUESTS NEW_CONNECTIONS STREAMS"""
import http.client, json, ssl, sys, time

host, keepalive, new, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# The default store: SSL_CERT_FILE, which yolo points at its bundle (the host's roots, the
# user's extra CA and the session CA).
ctx = ssl.create_default_context()
now = time.perf_counter

def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p / 100))] * 1e6)

def get(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"GET https://{host}{path}: {r.status} {body[:200]!r}")

# One kept-alive connection: a few requests to warm it, then the timed ones.
conn = http.client.HTTPSConnection(host, context=ctx)
for _ in range(20):
    get(conn, "/tiny")
kept = []
for _ in range(keepalive):
    t = now()
    get(conn, "/tiny")
    kept.append(now() - t)
conn.close()

# A new TCP connection and TLS handshake per request.
# A connection that fails (the loaded machine's server has dropped a handshake now and then)
# is counted, not timed.
fresh, failed = [], 0
for _ in range(new):
    t = now()
    c = http.client.HTTPSConnection(host, context=ctx)
    try:
        get(c, "/tiny")
    except (OSError, http.client.HTTPException) as e:
        failed += 1
        print(f"new connection to {host} failed: {e!r}", file=sys.stderr)
        continue
    finally:
        c.close()
    fresh.append(now() - t)

# The streamed response: its first chunk goes at once, the rest a second later.
first, whole = [], []
for _ in range(streams):
    c = http.client.HTTPSConnection(host, context=ctx)
    c.connect()
    t = now()
    c.request("GET", "/stream")
    r = c.getresponse()
    chunk = r.read1(64)
    first.append(now() - t)
    rest = r.read()
    whole.append(now() - t)
    if not chunk.startswith(b"first") or not rest:
        sys.exit(f"/stream on {host}: {chunk!r} then {rest!r}")
    c.close()

print(json.dumps({
    "host": host,
    "keepalive_p50": pct(kept, 50), "keepalive_p90": pct(kept, 90),
    "new_p50": pct(fresh, 50), "new_p90": pct(fresh, 90), "new_failed": failed,
    "stream_first_p50": pct(first, 50), "stream_whole_p50": pct(whole, 50),
}))
