"""The tool's signing keys: RSA 2048, one file each (0600) in LTI_KEYS_DIR, never sent.

The newest key signs (the service tokens' client assertions, the deep-linking responses);
the JWKS publishes it and the keys rotated out within ``KEEP_OLD`` before it, so that what
a platform fetched or what was signed just before a rotation still verifies.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK

from ..core.settings import REPO_ROOT, Settings

KEEP_OLD = timedelta(days=1)
SUFFIX = ".pem"


@dataclass(frozen=True)
class ToolKey:
    name: str  # its file's, the time it was made
    private_pem: str
    public_pem: str
    made_at: datetime

    def jwk(self) -> dict:
        """Its public half, under the kid PyLTI1p3 signs with: the key's RFC 7638
        thumbprint (pylti1p3.registration.Registration.get_kid)."""
        jwk = json.loads(JWK.from_pem(self.public_pem.encode()).export_public())
        return {**jwk, "alg": "RS256", "use": "sig"}

    @property
    def kid(self) -> str:
        return self.jwk()["kid"]


def keys_dir(settings: Settings) -> Path:
    if settings.lti_keys_dir:
        return Path(settings.lti_keys_dir)
    return REPO_ROOT / "var" / "lti" / "keys"


def rotate(settings: Settings, now: datetime | None = None) -> ToolKey:
    """Make a new key, which signs from now on; the old stay published for KEEP_OLD."""
    now = now or datetime.now(timezone.utc)
    folder = keys_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    kid = now.strftime("%Y%m%dT%H%M%S%fZ")
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path = folder / f"{kid}{SUFFIX}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return _load(path)


def _load(path: Path) -> ToolKey:
    pem = path.read_bytes()
    private = serialization.load_pem_private_key(pem, password=None)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    made = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    return ToolKey(path.name.removesuffix(SUFFIX), pem.decode(), public.decode(), made)


def all_keys(settings: Settings) -> list[ToolKey]:
    """Every key on disk, oldest first (their names are their times)."""
    folder = keys_dir(settings)
    if not folder.is_dir():
        return []
    return [_load(p) for p in sorted(folder.glob(f"*{SUFFIX}"))]


def current(settings: Settings) -> ToolKey | None:
    keys = all_keys(settings)
    return keys[-1] if keys else None


def jwks(settings: Settings, now: datetime | None = None) -> dict:
    """The public keys a platform verifies our signatures with: the newest, and those
    rotated out less than KEEP_OLD ago (a key is rotated out when the next is made)."""
    now = now or datetime.now(timezone.utc)
    keys = all_keys(settings)
    shown = keys[-1:]
    for older, successor in zip(keys, keys[1:]):
        if now - successor.made_at < KEEP_OLD:
            shown.insert(-1, older)
    return {"keys": [k.jwk() for k in shown]}
