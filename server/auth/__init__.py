"""Who asks: bearer tokens and a roster's tokens, browser sessions, the readers the
leaderboard remembers, CSRF tokens on forms, and the request guards (server/auth/deps.py)
that the JSON API and the pages share."""
