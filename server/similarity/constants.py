"""The thresholds of a similarity report, shared by the run (server/similarity/run.py) and
the pages, which must not import the run's detector.

Softmax kernels are short and share their idioms (a masked load, max, exp, sum): sixteen
independent designs of the course's own (reference_solutions/safe_softmax/from_scratch)
compare at 0.25 (median) and at most 0.81 with each other, a renamed copy at 1.00 and a
one-line change at 0.99. Pairs from FLOOR are listed; from FLAGGED they are marked.
"""

FLOOR = 0.5
FLAGGED = 0.9
