"""The JSON API: one router per resource, and deps.py for what they share (JSON bodies,
a submission as the API shows it). It never imports the pages (server/web/)."""
