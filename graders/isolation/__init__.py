"""Starting, confining and killing runners; the engine sees only the face below.

- ``sandbox``: bubblewrap (or no sandbox, where allowed) around every runner;
- ``launch``: a runner process started with its limits, its pipes and its output kept;
- ``limits``, ``jobuids``, ``cgroups``, ``killing``: what holds a runner in (rlimits, a uid
  of its own, a cgroup where there is one) and what ends it and everything it started;
- ``session``: one runner driven request by request, each under a budget;
- ``pool``: warm runners made ahead, and the GPU gate that keeps timing alone on a GPU;
- ``seed_cache``: the known-answer kernels compiled once, shared read-only;
- ``bytecode``, ``triton_key``: what every runner would otherwise work out again (its
  imports' bytecode, Triton's key), worked out once by the grader.

May import: shared. Must never import: engine, service, runner (a runner is started by the
command line in ``graders.shared.protocol.BOOT``, never imported). Who may import it: the
engine through this face only; the service, the tools and the platforms' entry points
anything here.
"""

from graders.isolation.launch import (CHECKER_NICE, TIMING_NICE, CloseReport, Launcher,
                                      RunnerProcess, lower_this_thread)
from graders.isolation.pool import ReadyRunner, RunnerPool
from graders.isolation.sandbox import default_launcher
from graders.isolation.session import (CallOverrun, CallRefused, RunnerCrashed, RunStopped,
                                       Session, fork_bomb_message, overrun_message,
                                       run_message)

__all__ = ["CHECKER_NICE", "CallOverrun", "CallRefused", "CloseReport", "Launcher",
           "ReadyRunner", "RunStopped", "RunnerCrashed", "RunnerPool", "RunnerProcess", "Session",
           "TIMING_NICE", "default_launcher", "fork_bomb_message", "lower_this_thread",
           "overrun_message", "run_message"]
