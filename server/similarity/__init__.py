"""Similarity reports: started and read here (reports.py), computed in a process of its
own (run.py: copydetect brings numpy and matplotlib, which the server never imports)."""
