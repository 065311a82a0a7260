"""LTI 1.3 and LTI Advantage on the tool's side (issue 40): an LMS (Canvas, Moodle) launches
its users into the autograder signed in, an instructor picks the exercise an activity is
(deep linking), scores go back to the LMS's gradebook (AGS) and rosters come from it (NRPS).

The protocol's JWT work is PyLTI1p3's (``adapter.py`` fits it to Starlette and to our
database); this package holds what is ours: the keys, the registrations, the launch's
extra checks and its user, the grades' outbox and its sender, the roster pull. It speaks
no HTTP routes: server/web/lti.py does. docs/lti.md walks an LMS admin through it.
"""
