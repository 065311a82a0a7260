"""``python -m server [--host 127.0.0.1] [--port 8000]``"""

import argparse
import logging

import uvicorn

from .app import create_app
from .connections import raise_file_limit, server_config
from .settings import get_settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    raise_file_limit()
    settings = get_settings()
    uvicorn.Server(server_config(create_app(settings), args.host, args.port,
                                 settings.header_timeout_s,
                                 settings.max_connections_per_client)).run()


if __name__ == "__main__":
    main()
