"""``python tests/health_sampler.py PORT SECONDS SOURCE_ADDRESS``: GET /api/health every
50 ms for SECONDS from SOURCE_ADDRESS (another client than the test's attacker), and print
one JSON list of [seconds taken, status] (status 0: no answer within 10 s).

A process of its own: sampling from the attacking test process would time that process's
own work (and its GIL) as the server's."""

import http.client
import json
import sys
import time


def main() -> None:
    port, seconds, source = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    samples = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                              source_address=(source, 0))
            conn.request("GET", "/api/health")
            status = conn.getresponse().status
            conn.close()
        except OSError:
            status = 0
        samples.append([time.monotonic() - started, status])
        time.sleep(0.05)
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
