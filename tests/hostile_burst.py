"""``python tests/hostile_burst.py PORT PATH TOKEN COUNT HOLD_S``: COUNT GETs of PATH at once
from 127.0.0.2, each on its own connection, with TOKEN as the bearer (a different token
each when TOKEN ends in ``{}``: it is formatted with the request's number); print the
statuses as a JSON list (null: no answer within a minute). HOLD_S > 0 keeps each answer's
connection open that long after its status line (a page's progress stream).

The attacker of tests/test_hostile_load.py, in a process of its own: in the test's process
its thousand coroutines would hold the interpreter's lock against the classmate whose
waits the test measures."""

import asyncio
import json
import sys

ADDRESS = "127.0.0.2"


async def one(port: int, path: str, token: str, hold_s: float) -> int | None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            "127.0.0.1", port, local_addr=(ADDRESS, 0)), 60)
    except (OSError, asyncio.TimeoutError):
        return None
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     "Connection: close\r\n\r\n".encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 60)
        status = int(line.split()[1]) if line else None
        if hold_s:
            await asyncio.sleep(hold_s)
        else:
            await asyncio.wait_for(reader.read(), 60)
        return status
    except (OSError, asyncio.TimeoutError, ValueError, IndexError):
        return None
    finally:
        writer.close()


async def main() -> None:
    port, path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    count, hold_s = int(sys.argv[4]), float(sys.argv[5])
    statuses = await asyncio.gather(*(one(port, path, token.format(i), hold_s)
                                      for i in range(count)))
    print(json.dumps(statuses))


if __name__ == "__main__":
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main())
