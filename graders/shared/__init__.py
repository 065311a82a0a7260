"""What every part of the graders may use, the untrusted runner included.

- ``protocol``, ``arrays``: the frames between the checker and a runner, and how a runner
  is started (``BOOT``);
- ``perfinputs``: the timed inputs both sides build from one seed;
- ``stats``: the timing statistics the runner measures and the checker reports;
- ``vocabulary``: the course's words for verdicts, devices and languages;
- ``gpuinfo``: what nvidia-smi and the driver's files say about a GPU, without torch;
- ``paths``: where the repository is;
- ``gpu_sizing``: how many slots a GPU takes and each runner's share of its memory.

May import: the standard library and numpy, and nothing else of the graders (so that the
runner and the server can take from here without reaching the trusted side).
vocabulary, paths, gpu_sizing: the standard library alone (the server imports the first
two, and gpu_sizing through graders.service.worker_client).
"""
