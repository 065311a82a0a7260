"""Mutants as patches: the bug an instructor reads is the whole file.

A mutant is a reference solution with a known bug in it. It is kept as a unified diff
against its reference, ``reference_solutions/<exercise>/mutants/<name>.patch`` (against
``solution.py``) or ``<name>.hip.patch`` (against ``solution.hip``). The text before the
first ``---`` line is the patch's header; it starts with what ``selftest`` must see::

    # expect: poisoned_row — naive exp without the max subtraction
    # (more '#' lines continue the why; a lone '#' line ends it, and notes may follow)
    --- solution.py
    +++ naive_unsafe_exp.py
    @@ -120,7 +120,7 @@
    ...

``python -m graders mutant-diff EXERCISE EDITED_FILE --name NAME --expect "check — why"``
writes one from an edited copy of the reference; ``mutant-apply`` writes a mutant out.

Why our own applier rather than ``patch`` or ``git apply``: the patches are our own plain
unified diffs (made by ``make_patch`` below, with difflib), the engine must materialise
them wherever it grades (CI's fresh Debian clone, the GPU image, Gradescope's and
PrairieLearn's containers) with nothing to install, and a failure must name the patch,
the hunk and the line that differs. Context lines are compared exactly (no fuzz, no
whitespace leniency): a hunk may only move, as a whole, to where its context matches (an
edit elsewhere in the reference shifts it), so a patch either yields the intended bug or
says it does not apply.
"""

from __future__ import annotations

import difflib
import re
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from graders.engine.registry import references_root
from graders.shared.vocabulary import LANGUAGE_BY_SUFFIX

PATCH_SUFFIX = ".patch"
# a mutant's language is its reference's: "<name>.patch" patches solution.py,
# "<name>.hip.patch" solution.hip, "<name>.cpp.patch" solution.cpp
OTHER_SUFFIXES = tuple(s for s in LANGUAGE_BY_SUFFIX if s != ".py")
_NAME = r"[a-z_][a-z0-9_]*"
EXPECT = re.compile(rf"^(?:#|//)\s*expect:\s*({_NAME}(?:\s*,\s*{_NAME})*)\s*(\(only\))?\s*"
                    r"(?:[—-]+\s*(.*))?$")
# "(only)" after the checks: exactly those fail, every other check passes (what a whole
# design earns: its points on everything but what the design cannot do); it is kept as a
# last name, which is neither a check nor a verdict
ONLY = "(only)"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class PatchError(ValueError):
    """A patch is malformed or does not apply to its reference; the message names it."""


@dataclass(frozen=True)
class Mutant:
    exercise: str
    name: str  # "naive_unsafe_exp"
    patch: Path  # .../mutants/naive_unsafe_exp.patch
    suffix: str  # the graded file's: ".py", ".hip" or ".cpp"

    @property
    def reference(self) -> Path:
        return self.patch.parent.parent / f"solution{self.suffix}"

    @property
    def filename(self) -> str:
        """What the materialised mutant is called (the suffix picks the language)."""
        return f"{self.name}{self.suffix}"

    @property
    def label(self) -> str:
        return f"{self.exercise}/mutants/{self.patch.name}"

    def header(self) -> str:
        return split_patch(self.patch.read_text(), self.label)[0]

    def expectation(self) -> tuple[tuple[str, ...], str]:
        return read_expectation(self.header(), self.label)


def mutant_for(patch: Path, exercise: str) -> Mutant:
    stem = patch.name.removesuffix(PATCH_SUFFIX)
    suffix = next((s for s in OTHER_SUFFIXES if stem.endswith(s)), ".py")
    return Mutant(exercise, stem.removesuffix(suffix) if suffix != ".py" else stem, patch,
                  suffix)


def list_mutants(exercise: str, root: Path | None = None) -> list[Mutant]:
    """Every mutant patch of an exercise, in file-name order (none: an empty list)."""
    folder = (root or references_root()) / exercise / "mutants"
    if not folder.is_dir():
        return []
    return [mutant_for(p, exercise) for p in sorted(folder.iterdir())
            if p.is_file() and p.name.endswith(PATCH_SUFFIX)]


def get_mutant(exercise: str, name: str, root: Path | None = None) -> Mutant:
    """One mutant by name: "naive_exp" or "naive_exp.py" (Triton), "naive_exp.hip" (HIP),
    or its patch's file name."""
    for mutant in list_mutants(exercise, root):
        if name in (mutant.filename, mutant.patch.name) or (
                mutant.suffix == ".py" and name == mutant.name):
            return mutant
    known = ", ".join(m.patch.name for m in list_mutants(exercise, root)) or "none"
    raise KeyError(f"{exercise} has no mutant {name!r} (known: {known})")


# -- the header -----------------------------------------------------------------------

def read_expectation(header: str, where: str) -> tuple[tuple[str, ...], str]:
    """The names on the header's ``# expect:`` line (a verdict, or checks that must all
    fail, then ``ONLY`` if no other check may) and why: the rest of that line and the
    ``#`` lines right under it."""
    lines = header.splitlines()
    match = EXPECT.match(lines[0].strip()) if lines else None
    if not match:
        raise ValueError(f"{where}: the first line must be '# expect: CHECK[, CHECK...] — why'")
    names = tuple(name.strip() for name in match.group(1).split(","))
    if match.group(2):
        names += (ONLY,)
    why = [(match.group(3) or "").strip()]
    for line in lines[1:]:
        text = line.strip()
        if not text.startswith(("#", "//")) or not text.lstrip("#/").strip():
            break  # a lone '#' (or any other line) ends the why; notes may follow
        why.append(text.lstrip("#/").strip())
    return names, " ".join(w for w in why if w)


def split_patch(text: str, where: str) -> tuple[str, list[str]]:
    """(header, diff lines from the first ``---`` line on)."""
    lines = _lines(text)
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return "".join(lines[:i]), lines[i:]
    raise PatchError(f"{where}: no '--- REFERENCE' and '+++ MUTANT' lines: not a unified diff")


# -- applying ---------------------------------------------------------------------------

def _lines(text: str) -> list[str]:
    """Lines with their '\\n' (only '\\n' ends a line: str.splitlines would also split at
    form feeds and other separators a source file may hold)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def _hunks(diff: list[str], where: str) -> list[tuple[int, list[str], list[str]]]:
    """(old start, old lines, new lines) per hunk, old start 1-based as in the header."""
    hunks: list[tuple[int, list[str], list[str]]] = []
    i = 2  # past '---' and '+++'
    while i < len(diff):
        match = _HUNK.match(diff[i])
        if not match:
            raise PatchError(f"{where}: line {diff[i].rstrip()!r} is not a hunk header")
        start = int(match.group(1))
        old_n = int(match.group(2) if match.group(2) is not None else 1)
        new_n = int(match.group(4) if match.group(4) is not None else 1)
        old: list[str] = []
        new: list[str] = []
        prev = " "  # the tag of the line before a '\\ No newline' marker
        i += 1
        while i < len(diff) and (len(old) < old_n or len(new) < new_n
                                 or diff[i].startswith("\\")):
            line = diff[i]
            tag, body = line[:1], line[1:]
            if tag == "\\":  # the line before it had no newline at the end of the file
                for side in ((old, new) if prev == " " else (old,) if prev == "-" else (new,)):
                    side[-1] = side[-1].removesuffix("\n")
            elif tag in (" ", "-", "+"):
                if tag != "+":
                    old.append(body)
                if tag != "-":
                    new.append(body)
                prev = tag
            elif line == "\n":  # an editor that strips trailing spaces ate a blank context line
                old.append("\n")
                new.append("\n")
                prev = " "
            else:
                raise PatchError(f"{where}: hunk {len(hunks) + 1}: unexpected line "
                                 f"{line.rstrip()!r}")
            i += 1
        if len(old) != old_n or len(new) != new_n:
            raise PatchError(f"{where}: hunk {len(hunks) + 1} is cut short "
                             f"({len(old)}/{old_n} old, {len(new)}/{new_n} new lines)")
        hunks.append((start, old, new))
    return hunks


def apply_patch(reference: str, patch: str, where: str = "patch") -> str:
    """The reference with the patch applied; PatchError (naming ``where``, the hunk and
    the first line that differs) when it does not apply exactly."""
    diff = split_patch(patch, where)[1]
    lines = _lines(reference)
    out: list[str] = []
    pos = 0  # lines of the reference consumed so far
    offset = 0  # how far the hunks found so far sat from where their headers said
    for number, (start, old, new) in enumerate(_hunks(diff, where), 1):
        # an empty old side (a pure insertion) sits after line `start`, else at `start`;
        # where the reference moved, the match nearest to that wins, as with GNU patch
        want = (start if not old else start - 1) + offset
        candidates = sorted(range(pos, len(lines) - len(old) + 1), key=lambda at: abs(at - want))
        at = next((c for c in candidates if lines[c:c + len(old)] == old), None)
        if at is None:
            # report where the hunk almost fits (most of its lines match; the nearest such
            # place), so the message names the line that changed, also after a shift
            closest = max(candidates, default=max(pos, want), key=lambda c: (
                sum(a == b for a, b in zip(lines[c:c + len(old)], old)), -abs(c - want)))
            raise PatchError(f"{where}: hunk {number} (line {start} of the reference) does not "
                             f"apply: {_first_difference(lines, closest, old)}")
        offset = at - (start if not old else start - 1)
        out += lines[pos:at] + new
        pos = at + len(old)
    return "".join(out + lines[pos:])


def _first_difference(lines: list[str], at: int, old: list[str]) -> str:
    for k, expected in enumerate(old):
        found = lines[at + k] if at + k < len(lines) else None
        if found != expected:
            got = "the end of the file" if found is None else repr(found.rstrip("\n"))
            return (f"the reference has {got} at line {at + k + 1} where the patch expects "
                    f"{expected.rstrip(chr(10))!r}, and that context is found nowhere after")
    return "its context is found nowhere in the reference"


def mutant_source(mutant: Mutant, reference: Path | None = None) -> str:
    """The mutant's source: its patch applied to its reference (or to ``reference``, an
    older copy of it). The patch must name the reference it was made from: a HIP diff
    saved as ``NAME.patch`` would otherwise be graded as Triton."""
    try:
        patch = mutant.patch.read_text()
        target = split_patch(patch, mutant.label)[1][0][4:].strip()
        if target != mutant.reference.name:
            raise PatchError(f"{mutant.label}: patches {target}, but a mutant named "
                             f"{mutant.patch.name} patches {mutant.reference.name}")
        return apply_patch((reference or mutant.reference).read_text(), patch, mutant.label)
    except OSError as exc:
        raise PatchError(f"{mutant.label}: {exc}") from None


def materialise(mutant: Mutant, folder: Path) -> Path:
    """Write the mutant's source to ``folder/<exercise>/`` (two exercises may have mutants of
    the same name; the file name keeps the language)."""
    source = mutant_source(mutant)
    (folder / mutant.exercise).mkdir(exist_ok=True)
    path = folder / mutant.exercise / mutant.filename
    path.write_text(source)
    return path


@contextmanager
def materialised(exercise: str, name: str, root: Path | None = None) -> Iterator[Path]:
    """A mutant as a temporary file, for tests and scripts::

        with materialised("my_exercise", "naive_exp") as path: ...
    """
    mutant = get_mutant(exercise, name, root)
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        yield materialise(mutant, Path(tmp))


# -- writing ----------------------------------------------------------------------------

def make_header(expect: str, notes: Sequence[str] = (), width: int = 96) -> str:
    """``# expect: EXPECT`` wrapped into '#' lines (read back as one why), then any notes
    after a lone '#'. ``expect`` is 'CHECK[, CHECK...] — why', or a verdict alone."""
    def wrap(text: str, first: str) -> list[str]:
        return textwrap.wrap(text, width, initial_indent=first, subsequent_indent="# ",
                             break_long_words=False, break_on_hyphens=False)

    lines = wrap(" ".join(expect.split()), "# expect: ")
    for i, note in enumerate(notes):
        lines += (["#"] if i == 0 else []) + wrap(note, "# ")
    header = "\n".join(lines) + "\n"
    names = read_expectation(header, "--expect")[0]
    if names != read_expectation(f"# expect: {expect}", "--expect")[0]:  # never seen
        raise ValueError(f"--expect {expect!r}: the wrapped header reads back differently")
    return header


def make_patch(reference: str, mutant: str, header: str, reference_name: str,
               mutant_name: str, context: int = 3) -> str:
    """The header, then a unified diff from the reference to the mutant."""
    if reference == mutant:
        raise PatchError(f"{mutant_name} is the reference itself: there is no bug to keep")
    out = [header if header.endswith("\n") else header + "\n"]
    for line in difflib.unified_diff(_lines(reference), _lines(mutant), reference_name,
                                     mutant_name, n=context):
        out.append(line)
        if not line.endswith("\n"):  # the last line of a file without a final newline
            out.append("\n" + _NO_NEWLINE + "\n")
    patch = "".join(out)
    if apply_patch(reference, patch, mutant_name) != mutant:  # never seen; never written
        raise PatchError(f"{mutant_name}: the patch made does not give the mutant back")
    return patch
