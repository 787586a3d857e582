//! External CUDA VMM allocations registered as symmetric memory
//! (`nvshmemx_buffer_register_symmetric` / `nvshmemx_buffer_unregister_symmetric`, NVSHMEM
//! 3.x), and [`VmmBuffer`], a helper that makes such an allocation through cudarc's driver API.
//!
//! NVSHMEM maps the registered physical memory into its symmetric heap's address range, so the
//! result is an ordinary [`SymTensor`]: RMA, collectives and kernels take it. Registration needs
//! NVSHMEM's VMM heap (the default; not with `NVSHMEM_DISABLE_CUDA_VMM=1`) and a size that is a
//! multiple of NVSHMEM's heap granularity (`NVSHMEM_CUMEM_GRANULARITY`, 512 MiB by default),
//! which [`Pgas::vmm_alloc`] rounds up to.

use std::ffi::c_void;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::DeviceRepr;

use super::memory::{Owner, SymTensor};
use super::pgas::{Inner, Pgas};
use super::shape::Shape;
use crate::error::{Error, Result};
use crate::heap;
use std::sync::Arc;

/// NVSHMEM's default `NVSHMEM_CUMEM_GRANULARITY`: registered buffers are multiples of it.
const NVSHMEM_DEFAULT_GRANULARITY: usize = 512 << 20;

/// Device memory made with `cuMemCreate` + `cuMemAddressReserve` + `cuMemMap` (CUDA VMM), the
/// kind [`Pgas::register_symmetric`] takes. Unmapped and released on drop.
pub struct VmmBuffer {
    ptr: CUdeviceptr,
    size: usize,
    handle: cu::CUmemGenericAllocationHandle,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for VmmBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VmmBuffer({} bytes @ {:#x})", self.size, self.ptr)
    }
}

impl VmmBuffer {
    /// The local (not symmetric) address of the mapping.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Its size in bytes (a multiple of the granularity).
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for VmmBuffer {
    fn drop(&mut self) {
        if self.inner.bind().is_err() {
            return;
        }
        // SAFETY: the mapping and handle were made by `vmm_alloc` and are released once.
        unsafe {
            let _ = cu::cuMemUnmap(self.ptr, self.size);
            let _ = cu::cuMemAddressFree(self.ptr, self.size);
            let _ = cu::cuMemRelease(self.handle);
        }
    }
}

/// NVSHMEM's heap granularity from `NVSHMEM_CUMEM_GRANULARITY`, else its default.
fn nvshmem_granularity(var: Option<&str>) -> Result<usize> {
    match var {
        None => Ok(NVSHMEM_DEFAULT_GRANULARITY),
        Some(v) => heap::parse_size(v).map_err(|_| Error::InvalidConfig {
            name: "NVSHMEM_CUMEM_GRANULARITY",
            value: v.to_string(),
            reason: "give bytes with an optional k, M or G suffix, e.g. 512M".into(),
        }),
    }
}

/// `bytes` rounded up to a multiple of `granularity`, at least one granule.
fn round_up(bytes: usize, granularity: usize) -> Option<usize> {
    bytes
        .max(1)
        .checked_next_multiple_of(granularity)
        .filter(|&b| b > 0)
}

/// Why registration cannot work in this environment, if it cannot.
fn registration_blocked(disable_vmm: Option<&str>) -> Option<String> {
    match disable_vmm {
        Some(v) if !matches!(v.trim(), "" | "0" | "n" | "N" | "false" | "FALSE") => Some(format!(
            "NVSHMEM_DISABLE_CUDA_VMM={v} gives NVSHMEM a static heap, and only its VMM heap can \
             map external buffers; unset it to register buffers"
        )),
        _ => None,
    }
}

impl Pgas {
    /// Allocates at least `bytes` of device memory on this PE's GPU through CUDA VMM
    /// (`cuMemCreate`, pinned device memory exportable as a POSIX file descriptor so NVSHMEM can
    /// share it with the other PEs of the node; GPUDirect RDMA capable where the GPU supports it),
    /// rounded up to NVSHMEM's heap granularity. Local: no other PE is involved.
    pub fn vmm_alloc(&self, bytes: usize) -> Result<VmmBuffer> {
        let inner = &self.inner;
        inner.bind()?;
        let device = inner.device as i32;
        let err = |what: &'static str| Error::cuda(what);
        // SAFETY: CUmemAllocationProp is a plain C struct of integers, enums with a 0 variant
        // and pointers; all zeroes is its documented "unset" value.
        let mut prop: cu::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device;
        prop.requestedHandleTypes =
            cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        let rdma = inner
            .ctx
            .attribute(
                cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
            )
            .map_err(err("querying GPUDirect RDMA support"))?;
        prop.allocFlags.gpuDirectRDMACapable = u8::from(rdma != 0);

        let mut min = 0usize;
        // SAFETY: `min` and `prop` are live locals; the context is bound.
        unsafe {
            cu::cuMemGetAllocationGranularity(
                &mut min,
                &prop,
                cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(err("querying the VMM allocation granularity"))?;
        let nv = nvshmem_granularity(std::env::var("NVSHMEM_CUMEM_GRANULARITY").ok().as_deref())?;
        let granularity = nv.max(min.max(1));
        let size = round_up(bytes, granularity).ok_or(Error::HeapExhausted {
            requested: bytes,
            heap: usize::MAX,
            in_use: String::new(),
        })?;

        let mut handle: cu::CUmemGenericAllocationHandle = 0;
        // SAFETY: `handle` and `prop` are live locals; `size` is a multiple of the granularity.
        unsafe { cu::cuMemCreate(&mut handle, size, &prop, 0) }
            .result()
            .map_err(err("creating VMM memory (cuMemCreate)"))?;
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: `ptr` is a live local; reserves fresh address space of `size` bytes.
        let mapped = unsafe { cu::cuMemAddressReserve(&mut ptr, size, granularity, 0, 0) }
            .result()
            // SAFETY: maps the whole of the `size`-byte allocation `handle` onto the range just
            // reserved at `ptr`, which nothing else uses.
            .and_then(|()| unsafe { cu::cuMemMap(ptr, size, 0, handle, 0) }.result());
        if let Err(e) = mapped {
            // SAFETY: frees only what was made above (the reservation if any, the allocation),
            // once; nothing mapped or exported it yet.
            unsafe {
                if ptr != 0 {
                    let _ = cu::cuMemAddressFree(ptr, size);
                }
                let _ = cu::cuMemRelease(handle);
            }
            return Err(err("mapping VMM memory (cuMemAddressReserve/cuMemMap)")(e));
        }
        // From here the buffer releases itself on every path.
        let buf = VmmBuffer {
            ptr,
            size,
            handle,
            inner: inner.clone(),
        };
        let access = cu::CUmemAccessDesc {
            location: prop.location,
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: `ptr..ptr + size` is the range mapped above; `access` is one live descriptor.
        unsafe { cu::cuMemSetAccess(ptr, size, &access, 1) }
            .result()
            .map_err(err("granting access to VMM memory (cuMemSetAccess)"))?;
        Ok(buf)
    }

    /// Registers `buf` as symmetric memory (`nvshmemx_buffer_register_symmetric`) and returns
    /// it as a tensor of `size / size_of::<T>()` elements at its symmetric address. Collective:
    /// every PE registers a buffer of the same size at the same point. Dropping the tensor
    /// unregisters it (collectively, like a free) and then releases the buffer.
    ///
    /// The memory keeps its contents (it is not zeroed). With `NVSHMEM_DISABLE_CUDA_VMM=1` this
    /// is [`Error::Unavailable`].
    pub fn register_symmetric<T: DeviceRepr>(&self, buf: VmmBuffer) -> Result<SymTensor<T>> {
        if let Some(reason) =
            registration_blocked(std::env::var("NVSHMEM_DISABLE_CUDA_VMM").ok().as_deref())
        {
            return Err(Error::Unavailable {
                what: "registering an external buffer as symmetric memory",
                reason,
            });
        }
        let elem = std::mem::size_of::<T>();
        if elem == 0 || !buf.size.is_multiple_of(elem) {
            return Err(Error::InvalidConfig {
                name: "Pgas::register_symmetric",
                value: format!("{} bytes as {}", buf.size, std::any::type_name::<T>()),
                reason: format!("the buffer must hold whole elements of {elem} bytes"),
            });
        }
        self.inner.bind()?;
        // SAFETY: `buf` is a live VMM mapping of `size` bytes on this PE's GPU.
        let mapped = unsafe {
            self.nvshmem().raw().nvshmemx_buffer_register_symmetric(
                buf.ptr as *mut c_void,
                buf.size,
                0,
            )
        };
        if mapped.is_null() {
            return Err(Error::Nvshmem {
                call: "nvshmemx_buffer_register_symmetric",
                status: -1,
                hint: "every PE must register a buffer of the same size, made by Pgas::vmm_alloc \
                       (cuMemCreate with a POSIX file descriptor handle, a multiple of \
                       NVSHMEM_CUMEM_GRANULARITY); NVSHMEM's log (NVSHMEM_DEBUG=WARN) says more",
            });
        }
        let len = buf.size / elem;
        let registration = Registration {
            mapped: mapped as CUdeviceptr,
            buf,
        };
        Ok(SymTensor::wrap(
            &self.inner,
            mapped as CUdeviceptr,
            Shape::flat(len),
            Owner::Other(Box::new(registration)),
        ))
    }
}

/// A live registration: unregisters, then releases the buffer, when dropped.
struct Registration {
    mapped: CUdeviceptr,
    buf: VmmBuffer,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let inner = &self.buf.inner;
        // After a sticky CUDA error NVSHMEM would abort the process instead (see Inner).
        if inner.context_lost() || inner.bind().is_err() {
            return;
        }
        // SAFETY: registered once by `register_symmetric`, unregistered once here.
        unsafe {
            inner
                .nvshmem
                .raw()
                .nvshmemx_buffer_unregister_symmetric(self.mapped as *mut c_void, self.buf.size)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_the_granularity() {
        let g = NVSHMEM_DEFAULT_GRANULARITY;
        assert_eq!(round_up(1, g), Some(g));
        assert_eq!(round_up(0, g), Some(g));
        assert_eq!(round_up(g, g), Some(g));
        assert_eq!(round_up(g + 1, g), Some(2 * g));
        assert_eq!(round_up(usize::MAX, g), None);
    }

    #[test]
    fn granularity_comes_from_nvshmem_s_variable() {
        assert_eq!(nvshmem_granularity(None).unwrap(), 512 << 20);
        assert_eq!(nvshmem_granularity(Some("2M")).unwrap(), 2 << 20);
        let e = nvshmem_granularity(Some("lots")).unwrap_err().to_string();
        assert!(e.contains("NVSHMEM_CUMEM_GRANULARITY"), "{e}");
    }

    #[test]
    fn a_static_heap_blocks_registration_with_the_fix() {
        assert!(registration_blocked(None).is_none());
        assert!(registration_blocked(Some("0")).is_none());
        let why = registration_blocked(Some("1")).unwrap();
        assert!(
            why.contains("NVSHMEM_DISABLE_CUDA_VMM=1") && why.contains("unset"),
            "{why}"
        );
    }
}
