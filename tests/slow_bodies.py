"""``python tests/slow_bodies.py PORT COUNT WAIT_S``: open COUNT connections at once, each
sending a POST /signin whose body never completes; after WAIT_S print how many were
answered 408 (the body deadline) and how many 429 (past the address's requests in flight,
at once: server/core/principal_limits.py), as "408 429".

The attacker of tests/test_slowloris.py, in a process of its own so that it runs at the
same priority as the server it attacks."""

import socket
import sys
import time

REQUEST = (b"POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/"
           b"x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken=ab")


def main() -> None:
    port, count, wait_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(REQUEST)
        socks.append(s)
    time.sleep(wait_s)
    cut_off = refused = 0
    for s in socks:
        s.settimeout(5)
        try:
            answer = s.recv(4096)
            cut_off += answer.startswith(b"HTTP/1.1 408")
            refused += answer.startswith(b"HTTP/1.1 429")
        except OSError:
            pass
        s.close()
    print(cut_off, refused)


if __name__ == "__main__":
    main()
