"""The graders: exercises as data, an untrusted runner, a trusted checker.

The parts, bottom up (docs/architecture.md draws them; tests/test_import_graph.py holds
the lines between them):

- ``shared/``: what every part may use (wire formats, seeded inputs, statistics, words);
- ``runner/`` and ``hip/``: the untrusted side, where a submission is imported;
- ``isolation/``: starting, confining and killing runners;
- ``engine/``: the trusted grading of one submission against an exercise;
- ``service/``: a slot, the worker process and its client, the Celery task;
- ``proof/``, ``bench/``, ``formats/``, ``integrations/``: the selftest and mutants, the
  benchmarks, the output formats, the course platforms' packages; ``cli``: the commands.

Importing this package imports nothing heavy: the checker needs numpy only, and
the runner (``graders.runner``) is the one place where torch, triton and the
submission are imported.
"""

GRADER_VERSION = "0.1.0"
