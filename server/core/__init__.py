"""What every layer may use: settings, the database and its migrations, the guards on
connections and bodies, each principal's budget, fair turns between clients, the security
headers, commit hooks, the change feed and the state shared between server processes, the
clock, secrets' strength, and the process's counters.

It imports nothing of the server's above it (the import-graph test holds that)."""
