# NVSHMEM4Py's interoperability guide (shared/seeds: "Interoperability"), its examples in order,
# run on pgas with the import line changed:
#     import nvshmem.core as nvshmem  ->  import pgas.nvshmem.core as nvshmem
# The guide's snippets are fragments; each completion says `# completed:` and why. Run under
# MPI: `mpirun -np 2 python3 interop.py` (or one process).

import pgas.nvshmem.core as nvshmem
import torch
import cupy as cp

# completed: the guide starts past initialization.
from mpi4py import MPI
try:
    from cuda.core.experimental import Device, system
except ImportError:  # completed: cuda.core 1.x has Device at cuda.core, and no .experimental
    from cuda.core import Device

    class system:  # noqa: N801 (the 0.x name)
        num_devices = cp.cuda.runtime.getDeviceCount()

dev = Device(MPI.COMM_WORLD.Get_rank() % system.num_devices)
dev.set_current()
nvshmem.init(device=dev, mpi_comm=MPI.COMM_WORLD, initializer_method="mpi")
torch.cuda.set_device(dev.device_id)

# Create a PyTorch tensor backed by NVSHMEM memory
tensor = nvshmem.interop.torch.empty((1000, 1000), dtype=torch.float32)

# Create a CuPy array backed by NVSHMEM memory
array = nvshmem.interop.cupy.empty((1000, 1000), dtype=cp.float32)

# Use PyTorch operations
# completed: the guide writes `tensor = tensor + 1.0` and `relu(tensor)`, which make new
# tensors outside symmetric memory that a put then could not target; in place they stay in it.
tensor += 1.0
torch.nn.functional.relu(tensor, inplace=True)

# Use CuPy operations
# completed: in place, as above.
array *= 2.0
cp.sqrt(array, out=array)

# Get my PE ID and total number of PEs
my_pe = nvshmem.my_pe()
n_pes = nvshmem.n_pes()

# completed: both frameworks' work is queued on their own streams; finish it before the put.
torch.cuda.synchronize()
cp.cuda.get_current_stream().synchronize()

# Put data to the next PE (PyTorch example)
next_pe = (my_pe + 1) % n_pes
nvshmem.put(tensor, tensor, count=tensor.numel(), pe=next_pe)

# Get data from previous PE (CuPy example)
prev_pe = (my_pe - 1) % n_pes
nvshmem.get(array, array, count=array.size, pe=prev_pe)

# completed: the put and get went on pgas's stream; a barrier completes them on every PE, and
# the values are checked (every element was 1 after relu, 0 after the sqrt of 0 * 2).
nvshmem.barrier_all()
assert float(tensor[0, 0]) == 1.0 and float(array[0, 0]) == 0.0, (tensor[0, 0], array[0, 0])

# Free the symmetric memory backing these objects
nvshmem.free_tensor(tensor)
nvshmem.free_array(array)

# completed: the guide ends without finalizing.
nvshmem.finalize()
print(f"interop: ok on PE {my_pe} of {n_pes}")
