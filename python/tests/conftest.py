"""pytest setup for the pgas module's tests.

test_cpu.py runs anywhere (CI: no GPU); test_gpu.py needs a GPU, NVSHMEM and torch and runs
on every PE of a job (`pgas-run -n 2 -- python3 -m pytest python/tests/test_gpu.py`). Both
import the installed module (`pip install ./python`) or the one on PYTHONPATH
(pip install --target DIR .device/python/pgas-*.whl, then PYTHONPATH=DIR)."""
