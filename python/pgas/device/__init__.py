"""Device APIs: NVSHMEM calls inside kernels that other Python compilers build.

- :mod:`pgas.device.numba`: Numba-CUDA kernels (``numba-cuda`` must be installed).

pgas's own kernel language needs none of this: ``pgas.kernel(source)`` compiles it.
"""
