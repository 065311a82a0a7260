"""The untrusted side: a process that imports one submission and calls it.

Nothing here is believed by the checker. It never sees a reference or an
expected output; it receives inputs, calls the student's function and sends the
outputs back. Start it through ``graders.isolation.launch``, never by importing it into a
trusted process.

May import: shared, hip, torch, triton, numpy. Must never import: engine, isolation,
service (what it shares with the checker lives in ``graders.shared``). Who may import it:
nothing trusted, except ``graders.bench``, which times our own baselines in-process by the
runner's method (never a submission).
"""
