"""``nvshmem.core.device`` over pgas: the device APIs of kernels other Python compilers build.

- :mod:`pgas.nvshmem.core.device.numba` is :mod:`pgas.device.numba` (Numba-CUDA kernels).
- NVSHMEM4Py's ``cute`` (CuTe DSL kernels) is not here: it needs the ``nvidia-cutlass-dsl``
  package, which the GPU machines pgas is tested on do not have (docs/python.md).
"""
