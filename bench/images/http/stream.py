"""The /stream backend: a chunked response whose first chunk goes at once and the rest after
DELAY seconds, so a client can tell a proxy that holds the first byte back from one that
forwards it."""
import socket, sys, threading, time

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0

def serve(conn):
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(4096)
            if not more:
                return
            data += more
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                     b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                     b"6\r\nfirst\n\r\n")
        time.sleep(DELAY)
        conn.sendall(b"5\r\nrest\n\r\n0\r\n\r\n")

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8080))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
