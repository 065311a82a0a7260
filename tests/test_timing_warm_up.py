"""The timed shapes' warm-up in the runner (graders/runner/timing.py ``warm_up``): whatever
fails there is only counted, never the runner's end. Stand-in torch: no GPU."""

from types import SimpleNamespace

from graders.runner import timing


class OutOfMemoryError(RuntimeError):
    pass


def _runner(calls):
    def empty(*args, **kwargs):  # another job has filled the GPU
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB")

    emptied = []
    cuda = SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: emptied.append(1))
    torch = SimpleNamespace(empty=empty, float32="f32", float16="f16", bfloat16="bf16",
                            int64="i64", cuda=cuda)
    module = SimpleNamespace(softmax=lambda x: calls.append(x))
    return SimpleNamespace(torch=torch, guard=None, module=module, submission="s.py"), emptied


def test_inputs_that_cannot_be_allocated_leave_the_runner_answering():
    calls = []
    runner, emptied = _runner(calls)
    header = {"fn": "softmax", "seed": 7, "args": ["@x"],
              "inputs": [{"name": "x", "kind": "uniform", "rows": 4096, "cols": 4096,
                          "dtype": "float32", "lo": -4.0, "hi": 4.0}]}
    reply = timing.warm_up(runner, header, lambda value, inputs: value)
    assert reply == {"ok": True, "warmed": False, "error": "OutOfMemoryError"}
    assert not calls and emptied == [1]  # never called; the cache given back all the same
