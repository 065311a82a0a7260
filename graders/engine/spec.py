"""An exercise as data: ``exercises/<name>/spec.toml`` read into typed objects.

The engine knows nothing about any particular exercise. A spec names the entry
points a submission must define, the module attributes the runner reports, the
checks (points, hints in the course's words, per-device parameters) and the
tolerances. The check logic itself is ``exercises/<name>/checks.py``: trusted
code that makes inputs, keeps the float64 reference and calls the judge.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.engine.params import ParamError, ParamSpec, parse_declarations, resolve
from graders.shared.arrays import FLOAT_DTYPES
from graders.shared.perfinputs import KINDS, InputRecipe
from graders.shared.vocabulary import Device

# Seconds a single call of the submission may take, its compiles included. On the H200 a
# tiled softmax kernel compiles in under a second; 20 s leaves room for several kernels
# and a busy host (docs/benchmarks.md). The CPU interpreter runs a program in ~3 ms.
CALL_BUDGETS_S = {Device.CPU: 60.0, Device.CUDA: 20.0}
# Seconds a call may hold the GPU at a stretch (its kernels running, not its compiles:
# graders.runner.gpu_gate). Checks run milliseconds of kernel time; every timing on the GPU
# waits for a holder, and every other check behind that timing, so one endless kernel held
# the whole class up for the call's 20 s.
GPU_HOLD_S = 5.0

# A whole run's time (issue 26, item 9): a kernel that sleeps just under each call's budget
# held a slot for 300 s (the run's old wall clock). A run now gets RUN_MULTIPLE times its
# exercise's reference grading time on that device (``cpu_reference_s``/``cuda_reference_s``
# in the spec's [limits], measured), and never less than the floor: a GPU run may compile a
# kernel per block size (up to ~10 s each at 65,536 elements on the H200), and the
# interpreter is slow: a design students copy (a `tl.reduce` with its own combine, the
# corpus's reduce_online_pairs.py) graded in 38-51 s on this project's 2-core CI box once
# it ran about twice as slowly (2026-12), so a 45 s floor failed a right kernel. Past it the run ends as
# `timeout`, keeping the points already earned.
RUN_MULTIPLE = 5
RUN_FLOORS_S = {Device.CPU: 90.0, Device.CUDA: 90.0}


class SpecError(Exception):
    """An exercise folder is malformed: a grader fault, never the student's."""


@dataclass(frozen=True)
class Tolerance:
    """|got - expected| <= atol + rtol * |expected|, elementwise."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class CheckSpec:
    name: str
    points: float
    description: str
    hints: dict[str, str]  # symptom -> what to fix, in the course's words
    params: dict[Device, dict[str, Any]]  # per device: shapes, dtypes, ...
    languages: tuple[str, ...] | None = None  # None: every language the exercise takes

    def hint(self, symptom: str) -> str:
        return self.hints.get(symptom) or self.hints.get("default", "")


@dataclass(frozen=True)
class PerfShape:
    """One graded GPU shape: a call of an entry point on inputs made from a seed.

    ``args``/``kwargs`` hold literals and ``"@name"`` references to ``inputs``; the output
    has the first input's rows (what the checker reads back) and dtype, or ``output``'s
    dtype where given (a loss per row: float32 [R]). Bytes moved = the least any
    implementation must move: every input read once + the output written once (shaped like
    the first input), unless the spec gives ``bytes``
    (a causal mask means the masked half of x need not be read at all).
    """

    fn: str
    inputs: tuple[InputRecipe, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    label: str
    min_bytes: int | None = None
    output: str | None = None  # the output's dtype, when it is not the first input's
    # the fraction of the copy above which a timing is refused as impossible, when not
    # performance.py's 1.05: a kernel that only reads may outrun a copy, which reads half
    # its bytes and writes the other half
    believable: float | None = None

    @property
    def bytes_moved(self) -> int:
        if self.min_bytes is not None:
            return self.min_bytes
        return sum(r.nbytes for r in self.inputs) + self.inputs[0].nbytes

    @property
    def rows(self) -> int:
        return self.inputs[0].rows

    @property
    def cols(self) -> int:
        return self.inputs[0].cols

    @property
    def dtype(self) -> str:
        return self.inputs[0].dtype

    @property
    def output_dtype(self) -> str:
        return self.output or self.dtype


@dataclass(frozen=True)
class PerformanceSpec:
    points: float
    shapes: tuple[PerfShape, ...]
    # how a timed call's rows are judged: as softmax rows (the [0, 1] range and the sum
    # rule), or as plain values (log-probabilities, losses)
    probabilities: bool = True
    # per entry point, its traffic table for the speed words: (traversals of the first
    # input, the design that moves that much); none: the softmax module's (performance.py)
    designs: dict[str, tuple[tuple[float, str], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class HipSpec:
    """How HIP kernels stand in for the entry points (graders/hip/launch.py reads it)."""

    block: int
    dtypes: tuple[str, ...]
    kernels: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class ExerciseSpec:
    name: str
    folder: Path
    title: str
    summary: str
    entry_points: tuple[str, ...]
    attributes: tuple[str, ...]
    checks: tuple[CheckSpec, ...]
    tolerances: dict[str, Tolerance]
    timeouts_s: dict[Device, float]
    call_budgets_s: dict[Device, float] = field(default_factory=lambda: dict(CALL_BUDGETS_S))
    hints: dict[str, str] = field(default_factory=dict)  # exercise-wide, per symptom
    order: int = 0  # where the course puts it: lists show exercises by this, then by name
    deadline: str | None = None
    languages: tuple[str, ...] = ("triton",)
    performance: PerformanceSpec | None = None
    hip: HipSpec | None = None
    params: tuple[ParamSpec, ...] = ()  # per-submission values (graders/engine/params.py)
    extra: dict[str, Any] = field(default_factory=dict)
    reference_s: dict[Device, float] = field(default_factory=dict)  # measured, per device

    def run_limit_s(self, device: Device) -> float:
        """How long one grading may take on ``device``: RUN_MULTIPLE times the reference's
        own grading, at least the floor, at most the spec's wall clock (``*_timeout_s``)."""
        reference = self.reference_s.get(device)
        if not reference:
            return self.timeouts_s[device]
        return min(self.timeouts_s[device], max(RUN_FLOORS_S[device], RUN_MULTIPLE * reference))

    def resolve_params(self, given: Any) -> dict[str, Any]:
        """Every declared parameter's value for one grading; ParamError if ``given`` does
        not fit the declaration."""
        return resolve(self.params, given, self.name)

    @property
    def statement_path(self) -> Path:
        return self.folder / "statement.md"

    @property
    def checks_module_path(self) -> Path:
        return self.folder / "checks.py"

    def skeleton_path(self, language: str) -> Path | None:
        suffix = {"triton": "py", "hip": "hip"}.get(language)
        path = self.folder / f"skeleton.{suffix}"
        return path if suffix and path.exists() else None


def _require(table: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise SpecError(f"{where}: missing `{key}`")
    value = table[key]
    if not isinstance(value, kind):
        raise SpecError(f"{where}: `{key}` should be {kind.__name__}, got {type(value).__name__}")
    return value


def _load_performance(raw: dict[str, Any], entry_points: list[str], where: str
                      ) -> PerformanceSpec | None:
    if "performance" not in raw:
        return None
    perf = _require(raw, "performance", dict, where)
    shapes = []
    for i, item in enumerate(_require(perf, "shapes", list, f"{where}: performance")):
        swhere = f"{where}: performance.shapes[{i}]"
        fn = _require(item, "fn", str, swhere)
        if fn not in entry_points:
            raise SpecError(f"{swhere}: {fn} is not an entry point")
        recipes = []
        for name, desc in _require(item, "inputs", dict, swhere).items():
            if not (isinstance(desc, list) and 3 <= len(desc) <= 4):
                raise SpecError(f"{swhere}: input {name} should be [rows, cols, dtype, kind?]")
            kind = desc[3] if len(desc) == 4 else "uniform"
            # class indices are int64; every other kind is a float tensor
            dtypes = ("int64",) if kind == "class_index" else FLOAT_DTYPES
            if kind not in KINDS or desc[2] not in dtypes:
                raise SpecError(f"{swhere}: input {name}: unknown kind or dtype")
            recipes.append(InputRecipe(name, kind, int(desc[0]), int(desc[1]), desc[2]))
        if not recipes:
            raise SpecError(f"{swhere}: no inputs")
        names = {r.name for r in recipes}
        args = tuple(item.get("args", [f"@{recipes[0].name}"]))
        kwargs = dict(item.get("kwargs", {}))
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, str) and value.startswith("@") and value[1:] not in names:
                raise SpecError(f"{swhere}: {value} names no input")
        first = recipes[0]
        label = item.get("label", f"{first.rows}×{first.cols} {first.dtype}")
        min_bytes = item.get("bytes")
        if min_bytes is not None and (not isinstance(min_bytes, int) or min_bytes <= 0):
            raise SpecError(f"{swhere}: bytes should be a positive integer")
        if any(shape.label == str(label) for shape in shapes):
            # a shape's figures, words and table row are known by its label
            raise SpecError(f"{swhere}: another timed shape is labelled {label!r}: give "
                            "each its own label")
        output = item.get("output")
        if output is not None and output not in FLOAT_DTYPES:
            raise SpecError(f"{swhere}: output should be one of {', '.join(FLOAT_DTYPES)}")
        if recipes[0].kind == "class_index":
            raise SpecError(f"{swhere}: the first input is the one timed rows are read "
                            "from and sized by: a float tensor, not class indices")
        believable = item.get("believable")
        if believable is not None and (not isinstance(believable, (int, float))
                                       or not 1.0 < believable <= 1.5):
            raise SpecError(f"{swhere}: believable should be a fraction of the copy "
                            "above 1 and at most 1.5")
        shapes.append(PerfShape(fn, tuple(recipes), args, kwargs, str(label), min_bytes,
                                output, None if believable is None else float(believable)))
    designs = {}
    for fn, table in dict(perf.get("designs", {})).items():
        if fn not in entry_points or not isinstance(table, list) or not all(
                isinstance(d, list) and len(d) == 2 and isinstance(d[0], (int, float))
                and isinstance(d[1], str) for d in table):
            raise SpecError(f"{where}: performance.designs.{fn} should be an entry point's "
                            "list of [traversals, \"the design\"]")
        designs[fn] = tuple((float(d[0]), d[1]) for d in table)
    return PerformanceSpec(points=float(perf.get("points", 100)), shapes=tuple(shapes),
                           probabilities=bool(perf.get("probabilities", True)),
                           designs=designs)


def _load_hip(raw: dict[str, Any], where: str) -> HipSpec | None:
    if "hip" not in raw:
        return None
    hip = _require(raw, "hip", dict, where)
    kernels = {}
    for name, k in _require(hip, "kernels", dict, f"{where}: hip").items():
        kwhere = f"{where}: hip.kernels.{name}"
        for key in ("params", "kernel", "outputs"):
            _require(k, key, list if key != "outputs" else dict, kwhere)
        kernels[name] = dict(k)
    return HipSpec(block=int(hip.get("block", 256)),
                   dtypes=tuple(hip.get("dtypes", ["float32"])), kernels=kernels)


def load_spec(folder: Path) -> ExerciseSpec:
    path = folder / "spec.toml"
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"{where}: {exc}") from None

    tolerances = {}
    for dtype, tol in _require(raw, "tolerance", dict, where).items():
        if dtype not in FLOAT_DTYPES:
            raise SpecError(f"{where}: tolerance for unknown dtype {dtype!r}")
        tolerances[dtype] = Tolerance(rtol=float(tol["rtol"]), atol=float(tol["atol"]))

    checks = []
    for i, c in enumerate(_require(raw, "checks", list, where)):
        cwhere = f"{where}: checks[{i}]"
        params = {}
        for device in (Device.CPU, Device.CUDA):
            params[device] = dict(_require(c, device.value, dict, cwhere))
            for dtype in params[device].get("dtypes", []):
                if dtype not in tolerances:
                    raise SpecError(f"{cwhere}: dtype {dtype} has no tolerance")
        checks.append(
            CheckSpec(
                name=_require(c, "name", str, cwhere),
                points=float(_require(c, "points", (int, float), cwhere)),
                description=_require(c, "description", str, cwhere),
                hints=dict(c.get("hints", {})),
                params=params,
                languages=tuple(c["languages"]) if "languages" in c else None,
            )
        )
    names = [c.name for c in checks]
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: duplicate check names")
    total = sum(c.points for c in checks)
    if abs(total - 100) > 1e-9:
        raise SpecError(f"{where}: check points add up to {total}, not 100")

    limits = raw.get("limits", {})
    entry_points = _require(raw, "entry_points", list, where)
    try:
        params = parse_declarations(raw.get("params", {}))
    except ParamError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return ExerciseSpec(
        name=folder.name,
        folder=folder,
        title=_require(raw, "title", str, where),
        summary=_require(raw, "summary", str, where),
        entry_points=tuple(_require(raw, "entry_points", list, where)),
        attributes=tuple(raw.get("attributes", [])),
        checks=tuple(checks),
        tolerances=tolerances,
        timeouts_s={
            Device.CPU: float(limits.get("cpu_timeout_s", 300)),
            Device.CUDA: float(limits.get("cuda_timeout_s", 300)),
        },
        call_budgets_s={
            Device.CPU: float(limits.get("cpu_call_budget_s", CALL_BUDGETS_S[Device.CPU])),
            Device.CUDA: float(limits.get("cuda_call_budget_s", CALL_BUDGETS_S[Device.CUDA])),
        },
        reference_s={device: float(limits[f"{device.value}_reference_s"])
                     for device in (Device.CPU, Device.CUDA)
                     if f"{device.value}_reference_s" in limits},
        hints={str(k): str(v) for k, v in raw.get("hints", {}).items()},
        order=int(raw.get("order", 0)),
        deadline=raw.get("deadline"),
        languages=tuple(raw.get("languages", ["triton"])),
        performance=_load_performance(raw, entry_points, where),
        hip=_load_hip(raw, where),
        params=params,
        extra={k: v for k, v in raw.items() if k not in {
            "title", "summary", "entry_points", "attributes", "checks", "tolerance", "limits",
            "deadline", "languages", "performance", "hip", "hints", "order", "params"}},
    )
