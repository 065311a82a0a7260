"""The load bench's mix: the entries of ``mix/manifest.toml`` (a file, its exercise and
its class), each checked to exist, and the choice of those sent on a device."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from graders.proof.mutants import get_mutant, materialise

REPO_ROOT = Path(__file__).resolve().parents[2]
MIX_DIR = Path(__file__).resolve().parent / "mix"
MANIFEST = MIX_DIR / "manifest.toml"

CLASSES = ("passing", "row_per_program", "mutant", "hostile")
HOSTILE = "hostile"


@dataclass(frozen=True)
class MixEntry:
    file: Path  # absolute: the file submitted
    exercise: str
    klass: str  # one of CLASSES
    what: str = ""
    shown: str = ""  # how the tables name it, when not by its path (a mutant's patch)

    @property
    def label(self) -> str:
        """The file as the tables show it: relative to the repository when inside it."""
        if self.shown:
            return self.shown
        try:
            return str(self.file.relative_to(REPO_ROOT))
        except ValueError:
            return self.file.name


def load_mix(manifest: Path = MANIFEST) -> list[MixEntry]:
    """The entries of the manifest, each file checked to exist and each mutant's patch
    applied (a renamed file or a stale patch fails here, not halfway through a GPU run).
    Mutants are written to a temporary folder, removed when this process exits."""
    entries = []
    folder = None
    for row in tomllib.loads(manifest.read_text())["entry"]:
        where = row.get("file") or row.get("mutant")
        if "mutant" in row:
            if folder is None:
                folder = Path(tempfile.mkdtemp(prefix="mix-mutants-"))
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
            mutant = get_mutant(row["exercise"], row["mutant"])
            file = materialise(mutant, folder)
            shown = str(mutant.patch.relative_to(REPO_ROOT)) if mutant.patch.is_relative_to(
                REPO_ROOT) else mutant.label
        else:
            file, shown = REPO_ROOT / row["file"], ""
        entry = MixEntry(file, row["exercise"], row["class"], row.get("what", ""), shown)
        if entry.klass not in CLASSES:
            raise ValueError(f"{manifest}: {where}: unknown class {entry.klass!r}")
        if not entry.file.is_file():
            raise FileNotFoundError(f"{manifest}: {where} does not exist")
        entries.append(entry)
    return entries


def select_mix(entries: list[MixEntry], device_kind: str,
               only_classes: list[str] | tuple[str, ...] | None) -> list[MixEntry]:
    """The entries to send. On the CPU the hostile class is left out unless asked for by
    name: the endless kernel would spin in the interpreter until the 300 s limit."""
    if only_classes:
        unknown = set(only_classes) - set(CLASSES)
        if unknown:
            raise ValueError(f"unknown classes {sorted(unknown)} (known: {', '.join(CLASSES)})")
        return [e for e in entries if e.klass in only_classes]
    if device_kind == "cpu":
        return [e for e in entries if e.klass != HOSTILE]
    return list(entries)
