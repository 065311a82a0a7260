"""The course's rules over its models: submissions (accepted, limited, queued again),
the leaderboard and its cache, the roster, deadlines and extensions, admission, progress,
each student's parameters, and how scores, times, names and text are checked and written.

It speaks no HTTP: it never imports FastAPI, server/api/ or server/web/; a rule that
refuses raises an error that carries its status and words (``Refused``, ``Unaccepted``,
``Unstorable``), and the HTTP layers answer with them."""
