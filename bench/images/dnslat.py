#!/usr/bin/env python3
"""Median latency of N sequential DNS queries (UDP) to SERVER for NAME: `dnslat.py SERVER NAME N`.
A `{i}` in NAME is replaced by the query's number (1..N): N different names."""
import socket, struct, sys, time

server, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
def encode(name):
    return b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.settimeout(2)
samples = []
for i in range(count):
    query = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + encode(name.replace("{i}", str(i + 1))) + struct.pack(">HH", 1, 1)
    start = time.perf_counter()
    sock.sendto(query, (server, 53))
    data, _ = sock.recvfrom(4096)
    samples.append(time.perf_counter() - start)
    rcode = data[3] & 0x0F
    if rcode != 0:
        sys.exit(f"query {i} answered rcode {rcode}")
samples.sort()
print(f"median_us={samples[len(samples)//2]*1e6:.0f} p90_us={samples[int(len(samples)*0.9)]*1e6:.0f}")
