"""The grader proving itself: ``mutants`` (the course's bugs, as patches to the reference
solutions) and ``selftest`` (every reference and mutant graded, each verdict compared with
what it expects). May import: shared, engine, isolation. Must never import it: the engine.
"""
