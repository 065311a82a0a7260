"""``python -m server [--host 127.0.0.1] [--port 8000]``, or ``python -m server lti …``
(the LMS side's keys and registrations: server/lti/cli.py)."""

import argparse
import gc
import logging
import sys

import uvicorn

from .app import create_app
from .core.connections import raise_file_limit, server_config
from .core.settings import get_settings


def main() -> None:
    if sys.argv[1:2] == ["lti"]:
        from .lti.cli import main as lti_main
        raise SystemExit(lti_main(sys.argv[2:]))
    parser = argparse.ArgumentParser(prog="python -m server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    raise_file_limit()
    settings = get_settings()
    app = create_app(settings)
    # What is imported and built by now lives as long as the process: frozen, it is out of
    # the collector's sight, and a full collection during a burst of 1,000 requests walks
    # only what the burst made. It paused the event loop for 290-310 ms, and with it every
    # other client; frozen, 90-240 ms (issue 26, item 11)
    gc.collect()
    gc.freeze()
    uvicorn.Server(server_config(app, args.host, args.port, settings.header_timeout_s,
                                 settings.max_connections_per_client)).run()


if __name__ == "__main__":
    main()
