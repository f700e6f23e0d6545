#!/usr/bin/env bash
# The guard's HTTP proxy (issue 25) against the same requests without inspection, in one run:
# one HTTPS server (nginx, HTTP/1.1 and HTTP/2, a CA of the benchmark's own given to yolo as
# `extra_ca`) behind two names, `inspected.http.bench.test` (an [http] allow rule: the proxy
# terminates TLS and forwards) and `direct.http.bench.test` (only allowlisted: the address
# allowlist, no proxy). From inside the agent container (`yolo exec`), for each name: latency of
# requests on one kept-alive connection, of requests on a new TLS connection, the download
# rate of a big file, and the time to the first byte of a streamed response; then the guard's
# resident memory with the proxy idle, before and after the load. Added = inspected - direct.
# `bash bench/bench.sh` runs it last; `SECTIONS=http bash bench/bench.sh` (or this script)
# runs it alone. Same requirements and clean-up as bench.sh. Knobs: KEEPALIVE (requests on one
# connection, 2000), NEW (new connections, 200), STREAMS (10), BIG (download size, 1G),
# ROUNDS (each name measured this many times, alternating; 2), SERVER_H2=0 (the server offers
# HTTP/1.1 only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SERVER_H2=${SERVER_H2:-1} KEEPALIVE=${KEEPALIVE:-2000} NEW=${NEW:-200} STREAMS=${STREAMS:-10} BIG=${BIG:-1G} ROUNDS=${ROUNDS:-2}
. "$here/common.sh"
section() { printf '\n== %s\n' "$*"; }
INSPECTED=inspected.http.bench.test DIRECT=direct.http.bench.test
NET=yolo-bench-http-net

docker build -q -t yolo-bench-tools:1 "$here/images" >/dev/null
docker build -q -t yolo-bench-http:1 "$here/images/http" >/dev/null

# The server's CA and a leaf for both names.
certs=$tmp/certs; mkdir -p "$certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=yolo bench CA" \
  -keyout "$certs/ca.key" -out "$certs/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$INSPECTED" \
  -keyout "$certs/server.key" -out "$certs/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$INSPECTED" "$DIRECT" > "$certs/ext"
openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial \
  -days 2 -extfile "$certs/ext" -out "$certs/server.pem" 2>/dev/null
chmod 644 "$certs"/*

docker network create --label dev.yolo.bench=1 "$NET" >/dev/null
# Two instances of the same server, one per name: the guard inspects by address (its redirect
# sends every connection to an inspected address to the proxy), so the direct name needs an
# address of its own, as two real hosts have.
for which in inspected direct; do
  docker run -d --label dev.yolo.bench=1 --network "$NET" --name "yolo-bench-https-$which" -v "$certs:/certs:ro" \
    yolo-bench-http:1 sh -c "{ [ $SERVER_H2 = 1 ] || sed -i 's/ http2 / /' /etc/nginx/nginx.conf; } && truncate -s $BIG /srv/big && (python3 /usr/local/bin/stream.py 1 &) && exec nginx -g 'daemon off;'" >/dev/null
done
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }
docker run -d --label dev.yolo.bench=1 --network "$NET" --name yolo-bench-http-dns yolo-bench-tools:1 \
  dnsmasq -k --no-resolv --no-hosts --address=/"$INSPECTED"/"$(ip_of yolo-bench-https-inspected)" \
  --address=/"$DIRECT"/"$(ip_of yolo-bench-https-direct)" --local-ttl=3600 >/dev/null
dns_ip=$(ip_of yolo-bench-http-dns)
cat > "$YOLO_CONFIG_DIR/config.toml" <<TOML
extra_ca = ["$certs/ca.pem"]
[http."$INSPECTED"]
allow = ["GET /**"]
[firewall]
docker_network = "$NET"
allow_internal_answers = true
allow = ["*.http.bench.test"]
upstream_dns = "$dns_ip"
TOML
echo '{"image": "yolo-bench-http:1"}' > "$tmp/ws/.devcontainer/devcontainer.json"
"$YOLO" up >/dev/null
guard=$(docker ps -q --filter label=dev.yolo.bench=1 --filter label=dev.yolo.role=guard --filter network="$NET" | head -1)
# The guard's PID 1 is `yolo-guard run` itself, or (under Docker's init) its one child.
init_pid=$(docker inspect -f '{{.State.Pid}}' "$guard")
gpid=$init_pid
grep -q yolo-guard /proc/"$gpid"/comm || gpid=$(awk '{print $1}' /proc/"$init_pid"/task/"$init_pid"/children)
# The guard's CPU time (user + system, in clock ticks): what the proxy costs, apart from the
# machine's load, which moves the latencies and rates.
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/"$gpid"/stat; }
memory() { awk '/^(VmRSS|VmHWM)/ {printf "%s %.1f MiB  ", $1, $2/1024} END {print ""}' /proc/"$gpid"/status; }

section "guard memory, proxy idle, before any request"
memory | tee "$tmp/mem-before"

results=$tmp/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  for host in "$DIRECT" "$INSPECTED"; do
    section "round $round: $host (latency: $KEEPALIVE kept-alive requests, $NEW new connections, $STREAMS streams)"
    c0=$(cpu)
    "$YOLO" exec python3 /usr/local/bin/httpbench.py "$host" "$KEEPALIVE" "$NEW" "$STREAMS" | tee -a "$results"
    c1=$(cpu)
    section "round $round: $host (download of $BIG)"
    rate=$("$YOLO" exec curl -sS --fail -o /dev/null -w '%{speed_download} %{size_download}' "https://$host/big")
    c2=$(cpu)
    echo "{\"host\": \"$host\", \"download_bps\": ${rate% *}, \"download_bytes\": ${rate#* },
      \"guard_cpu_latency_s\": $(((c1 - c0) * 1000 / hz))e-3, \"guard_cpu_download_s\": $(((c2 - c1) * 1000 / hz))e-3}" \
      | tr -d '\n' | tee -a "$results"; echo | tee -a "$results"
  done
done

section "guard memory, proxy idle, after the load (3 s later)"
sleep 3
memory | tee "$tmp/mem-after"

section "HTTP proxy: inspected vs direct (medians over $ROUNDS rounds)"
python3 - "$results" "$INSPECTED" "$DIRECT" "$tmp/mem-before" "$tmp/mem-after" "$KEEPALIVE" "$NEW" "$STREAMS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ins, dire = sys.argv[2], sys.argv[3]
def med(host, key):
    vals = [r[key] for r in rows if r["host"] == host and key in r] or [0]
    return statistics.median(vals)
print(f"{'figure':34} {'direct':>11} {'inspected':>11} {'added':>10} {'ratio':>6}  target")
def line(name, key, target, scale=1e-3, unit="ms"):
    d, i = med(dire, key) * scale, med(ins, key) * scale
    print(f"{name:34} {d:8.2f} {unit:2} {i:8.2f} {unit:2} {i - d:+7.2f} {unit:2} {i / d:5.2f}x  {target}")
line("kept-alive request, p50", "keepalive_p50", "added <= 1 ms")
line("kept-alive request, p90", "keepalive_p90", "")
line("new TLS connection + request, p50", "new_p50", "added <= 3 ms")
line("new TLS connection + request, p90", "new_p90", "")
print("new connections that failed (direct, inspected):", sum(r.get("new_failed", 0) for r in rows if r["host"] == dire), sum(r.get("new_failed", 0) for r in rows if r["host"] == ins))
line("stream: first byte of the body, p50", "stream_first_p50", "not held back (~0, not ~1000 ms)")
line("stream: whole response, p50", "stream_whole_p50", "")
d, i = med(dire, "download_bps") / 1e6, med(ins, "download_bps") / 1e6
print(f"{'download':34} {d:8.1f} MB/s {i:6.1f} MB/s {'':10} {i / d:5.2f}x  inspected >= 200 MB/s")
for host in (dire, ins):
    # What the guard's one thread spends (the direct name's is the guard idle alongside).
    per_gb = med(host, "guard_cpu_download_s") / (med(host, "download_bytes") / 1e9)
    n = int(sys.argv[6]) + int(sys.argv[7]) + int(sys.argv[8])
    per_req = med(host, "guard_cpu_latency_s") / n * 1e6
    print(f"guard CPU, {host:26}: {per_gb:6.2f} s per GB downloaded, {per_req:6.0f} us per request")
print("guard before the load:", open(sys.argv[4]).read().strip())
print("guard after the load: ", open(sys.argv[5]).read().strip(), " target: VmRSS < 16 MiB idle")
PY
