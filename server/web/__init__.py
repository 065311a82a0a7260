"""The pages, server-rendered from frontend/: one router per audience (signin, student,
leaderboard, instructor, extensions, similarity), written through render.py and guarded
by guards.py. Pages never import the JSON API (server/api/), nor it them."""
