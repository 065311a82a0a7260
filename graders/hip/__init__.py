"""HIP C++ submissions: device code compiled at run time, launched one block per row.

``source`` turns a student's file into what a CUDA compiler accepts (a prelude of HIP
spellings, ``#line`` so diagnostics name the student's own lines) and reads compiler
logs; ``nvrtc`` compiles without a GPU (the verdict ``compiled``); ``launch`` compiles
with CuPy's NVRTC on an NVIDIA GPU and wraps each kernel as the Python entry point the
checks call. AMD (hiprtc through hip-python) would be a third module beside ``launch``
with the same ``load_kernels`` signature; it is not written or tested yet.
"""
