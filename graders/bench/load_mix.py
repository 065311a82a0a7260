"""The load bench's mix: the entries of ``mix/manifest.toml`` (a file, its exercise and
its class), each checked to exist, the choice of those sent on a device, and the source
sent as one student: with that student's own parameters written in (``source_for``)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from graders.proof.mutants import get_mutant, materialise

REPO_ROOT = Path(__file__).resolve().parents[2]
MIX_DIR = Path(__file__).resolve().parent / "mix"
MANIFEST = MIX_DIR / "manifest.toml"

CLASSES = ("passing", "row_per_program", "mutant", "hostile")
HOSTILE = "hostile"
# a dtype's element size, for an ``[[own_params]]`` write's {dtype_bytes}
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int32": 4,
               "int64": 8, "int8": 1, "uint8": 1}


@dataclass(frozen=True)
class MixEntry:
    file: Path  # absolute: the file submitted
    exercise: str
    klass: str  # one of CLASSES
    what: str = ""
    shown: str = ""  # how the tables name it, when not by its path (a mutant's patch)
    # how a student writes their own parameters into this file: (find, write) pairs, from
    # the manifest's [[own_params]] for the entry's exercise (``source_for``)
    own_params: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The file as the tables show it: relative to the repository when inside it."""
        if self.shown:
            return self.shown
        try:
            return str(self.file.relative_to(REPO_ROOT))
        except ValueError:
            return self.file.name


def source_for(entry: MixEntry, params: Mapping[str, Any] | None) -> str:
    """The file's text as the student whose parameters are ``params`` sends it: each of
    the entry's ``own_params`` finds replaced by its write, formatted with their values
    (as they would type in the numbers their exercise page shows). Without parameters (an
    exercise that has none, or a server that gave none) the file as it is."""
    text = entry.file.read_text()
    if not params or not entry.own_params:
        return text
    values = dict(params)
    if "dtype" in values:
        values["dtype_bytes"] = DTYPE_BYTES[str(values["dtype"])]
    for find, write in entry.own_params:
        if find not in text:
            raise ValueError(f"{entry.label}: `{find}` is not in the file: [[own_params]] of "
                             f"{entry.exercise} in the manifest no longer fits it")
        text = text.replace(find, write.format(**values))
    return text


def _own_params(rows: list[dict]) -> dict[str, tuple[tuple[str, str], ...]]:
    by_exercise: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        by_exercise.setdefault(row["exercise"], []).append((row["find"], row["write"]))
    return {name: tuple(pairs) for name, pairs in by_exercise.items()}


def load_mix(manifest: Path = MANIFEST) -> list[MixEntry]:
    """The entries of the manifest, each file checked to exist and each mutant's patch
    applied (a renamed file or a stale patch fails here, not halfway through a GPU run), and
    each ``[[own_params]]`` find checked to be in every file of its exercise. Mutants are
    written to a temporary folder, removed when this process exits."""
    entries = []
    folder = None
    table = tomllib.loads(manifest.read_text())
    own = _own_params(table.get("own_params", []))
    for row in table["entry"]:
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
        entry = MixEntry(file, row["exercise"], row["class"], row.get("what", ""), shown,
                         own.get(row["exercise"], ()) if row.get("own_params", True) else ())
        if entry.klass not in CLASSES:
            raise ValueError(f"{manifest}: {where}: unknown class {entry.klass!r}")
        if not entry.file.is_file():
            raise FileNotFoundError(f"{manifest}: {where} does not exist")
        text = entry.file.read_text() if entry.own_params else ""
        for find, _ in entry.own_params:
            if find not in text:
                raise ValueError(f"{manifest}: {where}: `{find}` ([[own_params]] of "
                                 f"{entry.exercise}) is not in the file")
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
