"""With GRADERS_CPU_SAMPLE=PREFIX set and this folder first on PYTHONPATH, each Python
process started samples its own CPU by stack into PREFIX.PID.json
(docs/experiments/cpu_sampler.py)."""

import os
import sys

if os.environ.get("GRADERS_CPU_SAMPLE"):
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import cpu_sampler

    cpu_sampler.start(f"{os.environ['GRADERS_CPU_SAMPLE']}.{os.getpid()}.json")
