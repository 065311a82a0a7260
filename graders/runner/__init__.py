"""The untrusted side: a process that imports one submission and calls it.

Nothing here is believed by the checker. It never sees a reference or an
expected output; it receives inputs, calls the student's function and sends the
outputs back. Start it through ``graders.launch``, never by importing it into a
trusted process.
"""
