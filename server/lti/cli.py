"""``python -m server lti …``: the tool's keys and the platforms, where the server runs.

    python -m server lti keys rotate
    python -m server lti register --issuer ISS --client-id ID --deployment DEP [--deployment …]
        --auth-url URL --token-url URL --jwks-url URL [--frame-origin ORIGIN …]
    python -m server lti list
"""

from __future__ import annotations

import argparse
import sys

from ..core.db import make_engine, make_sessionmaker
from ..core.migrate import upgrade
from ..core.settings import get_settings
from . import keys, registry


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m server lti")
    commands = parser.add_subparsers(dest="command", required=True)
    key = commands.add_parser("keys", help="the tool's signing keys")
    key.add_argument("action", choices=["rotate"])
    reg = commands.add_parser("register", help="add (or update) an LMS's registration")
    reg.add_argument("--issuer", required=True)
    reg.add_argument("--client-id", required=True)
    reg.add_argument("--deployment", action="append", required=True,
                     help="a deployment id (again for each one)")
    reg.add_argument("--auth-url", required=True, help="the LMS's OIDC authentication URL")
    reg.add_argument("--token-url", required=True, help="the LMS's access token URL")
    reg.add_argument("--jwks-url", required=True, help="the LMS's public keyset URL")
    reg.add_argument("--frame-origin", action="append", default=[],
                     help="an LMS web address whose pages frame the tool (default: the issuer's)")
    commands.add_parser("list", help="the registered platforms")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = get_settings()
    if args.command == "keys":
        key = keys.rotate(settings)
        print(f"new key {key.kid} ({keys.keys_dir(settings) / (key.name + keys.SUFFIX)}); "
              f"the JWKS publishes it and, for {keys.KEEP_OLD}, the one before")
        return 0
    engine = make_engine(settings.database_url)
    upgrade(engine)
    sessions = make_sessionmaker(engine)
    try:
        with sessions() as db:
            if args.command == "register":
                try:
                    platform = registry.register(db, registry.PlatformFields(
                        args.issuer, args.client_id, tuple(args.deployment), args.auth_url,
                        args.token_url, args.jwks_url, tuple(args.frame_origin)))
                except registry.Unregistrable as exc:
                    print(f"not registered: {exc}", file=sys.stderr)
                    return 2
                db.commit()
                print(f"registered {platform.issuer} (client id {platform.client_id}), "
                      f"deployments {', '.join(platform.deployment_ids)}, framed by "
                      f"{', '.join(platform.frame_origins) or 'no one'}")
            else:
                for p in registry.platforms(db):
                    print(f"{p.issuer}\tclient id {p.client_id}\tdeployments "
                          f"{','.join(p.deployment_ids)}\tauth {p.auth_login_url}\ttoken "
                          f"{p.auth_token_url}\tjwks {p.key_set_url}\tframed by "
                          f"{','.join(p.frame_origins)}")
    finally:
        engine.dispose()
    return 0
