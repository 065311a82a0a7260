"""The trusted engine: an exercise as data, and one submission graded against it.

- ``spec``, ``registry``, ``params``: exercises read from their folders (the engine never
  names one), and the per-student parameters;
- ``casekit``, ``judge``: what the exercises' check functions are written with, and how an
  output is judged against the float64 answer;
- ``checker``: the grading of one submission, in pieces: ``plan`` (which checks, parts
  and lanes), ``lanes`` (runners loaded with the submission, run on threads under budgets),
  ``calls`` (one check driven over one runner), ``timing`` (the graded shapes timed),
  ``outcome`` (the run's end turned into a verdict and a score);
- ``performance``: the timed figures checked and scored; ``results``, ``report``: the result
  and its text.

Trusted: it never imports a submission, nor the runner's code. It reaches runners only
through isolation's face (``graders.isolation``, what its ``__init__`` exports), never its
internals. May import: shared, the face of isolation, numpy. Must never import it: shared,
isolation, runner, hip.
"""
