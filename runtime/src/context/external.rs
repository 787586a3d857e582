//! External CUDA VMM allocations registered as symmetric memory
//! (`nvshmemx_buffer_register_symmetric` / `nvshmemx_buffer_unregister_symmetric`, NVSHMEM
//! 3.x), and [`VmmBuffer`], a helper that makes such an allocation through cudarc's driver API.
//!
//! NVSHMEM maps the registered physical memory into its symmetric heap's address range, so the
//! result is an ordinary [`SymTensor`]: RMA, collectives and kernels take it. Registration needs
//! NVSHMEM's VMM heap (the default; not with `NVSHMEM_DISABLE_CUDA_VMM=1`) and a size that is a
//! multiple of NVSHMEM's heap granularity (`NVSHMEM_CUMEM_GRANULARITY`, 512 MiB by default),
//! which [`Pgas::vmm_alloc`] rounds up to.
//!
//! [`Pgas::register_external`] takes VMM memory that another library made (PyTorch, CuPy, a
//! cudarc buffer) by address. Registration is collective, and a PE whose buffer NVSHMEM cannot
//! take would leave the others waiting inside it, so every PE first checks its own buffer (VMM
//! memory of this GPU, exportable to the node's other processes, whole granules) and then all
//! agree on the sizes (one 8-byte `fcollect`, `agree.rs`): a bad buffer on any PE, or sizes that
//! differ, is an `Err` on every PE, before NVSHMEM sees anything.

use std::ffi::c_void;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::DeviceRepr;

use super::agree;
use super::memory::{Owner, SymTensor};
use super::pgas::{Inner, Pgas};
use super::shape::Shape;
use crate::error::{Error, Result};
use crate::heap::{self, SpanKind};
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
    /// every PE registers a buffer of the same size at the same point (sizes that differ are an
    /// `Err` on every PE). Dropping the tensor unregisters it (collectively, like a free) and
    /// then releases the buffer.
    ///
    /// The memory keeps its contents (it is not zeroed). With `NVSHMEM_DISABLE_CUDA_VMM=1` this
    /// is [`Error::Unavailable`].
    pub fn register_symmetric<T: DeviceRepr>(&self, buf: VmmBuffer) -> Result<SymTensor<T>> {
        let (ptr, size) = (buf.ptr, buf.size);
        // SAFETY: `buf` is a live VMM mapping of `size` bytes at `ptr`, and the registration
        // owns it (keep-alive) until after it is unregistered.
        unsafe { self.register_external(ptr, size, buf) }
    }

    /// Registers `bytes` of device memory at `ptr` that another library allocated with CUDA
    /// VMM (`cuMemCreate` + `cuMemMap`: PyTorch's expandable segments, CuPy's or cudarc's VMM
    /// allocations) as symmetric memory (`nvshmemx_buffer_register_symmetric`), and returns it
    /// as a tensor of `bytes / size_of::<T>()` elements at its symmetric address. `keep_alive`
    /// (the owner of the memory: a tensor handle, a cudarc buffer) is dropped after the
    /// registration is undone. Collective: every PE registers a buffer of the same size at the
    /// same point; dropping the tensor unregisters it, collectively, like a free.
    ///
    /// Refused on every PE, before NVSHMEM is called, with the fix: memory that is not CUDA VMM
    /// (`cudaMalloc`, a caching allocator's block: copy it into `pgas.alloc` instead), VMM
    /// memory of another GPU or without a POSIX file descriptor handle (NVSHMEM shares it with
    /// the node's other processes that way), a size that is not a whole number of NVSHMEM's
    /// heap granules (`NVSHMEM_CUMEM_GRANULARITY`), a `ptr` other than the start of its
    /// allocation (NVSHMEM maps an allocation from its first byte), a range past its end, and
    /// sizes that differ across PEs. With `NVSHMEM_DISABLE_CUDA_VMM=1`, [`Error::Unavailable`].
    ///
    /// # Safety
    /// `ptr..ptr + bytes` must stay mapped, and its owner must not free or reuse it, until the
    /// returned tensor and every view of it are gone; handing the owner in as `keep_alive`
    /// does that.
    pub unsafe fn register_external<T: DeviceRepr>(
        &self, ptr: CUdeviceptr, bytes: usize, keep_alive: impl Send + Sync + 'static,
    ) -> Result<SymTensor<T>> {
        if let Some(reason) =
            registration_blocked(std::env::var("NVSHMEM_DISABLE_CUDA_VMM").ok().as_deref())
        {
            return Err(Error::Unavailable {
                what: "registering an external buffer as symmetric memory",
                reason,
            });
        }
        self.inner.bind()?;
        let granularity =
            nvshmem_granularity(std::env::var("NVSHMEM_CUMEM_GRANULARITY").ok().as_deref())?;
        let elem = std::mem::size_of::<T>();
        let local = check_whole::<T>(bytes, elem, granularity)
            .and_then(|()| vmm_check(ptr, bytes, self.inner.device));
        // Every PE says what it can register (u64::MAX: nothing) before any calls NVSHMEM.
        let offer = if local.is_ok() {
            bytes as u64
        } else {
            u64::MAX
        };
        let offers = agree::gather(&self.inner, offer)?;
        agreed(self.my_pe(), &offers, local)?;
        // SAFETY: `ptr..ptr + bytes` is VMM memory of this PE's GPU (vmm_check), live for as long
        // as the registration (the caller's contract), and every PE registers the same size now.
        let mapped = unsafe {
            self.nvshmem()
                .raw()
                .nvshmemx_buffer_register_symmetric(ptr as *mut c_void, bytes, 0)
        };
        if mapped.is_null() {
            return Err(Error::Nvshmem {
                call: "nvshmemx_buffer_register_symmetric",
                status: -1,
                hint: "the buffer passed pgas's checks (VMM memory of this GPU, exportable, whole \
                       granules, the same size everywhere); NVSHMEM's log (NVSHMEM_DEBUG=WARN) \
                       says why NVSHMEM refused it",
            });
        }
        self.inner
            .live
            .track(mapped as CUdeviceptr, bytes, SpanKind::Registered);
        let registration = Registration {
            mapped: mapped as CUdeviceptr,
            size: bytes,
            inner: self.inner.clone(),
            _keep_alive: Box::new(keep_alive),
        };
        Ok(SymTensor::wrap(
            &self.inner,
            mapped as CUdeviceptr,
            Shape::flat(bytes / elem),
            Owner::Other(Box::new(registration)),
        ))
    }
}

/// The size checks of a registration that need no GPU: whole elements, whole granules.
fn check_whole<T>(
    bytes: usize, elem: usize, granularity: usize,
) -> std::result::Result<(), String> {
    if elem == 0 || bytes == 0 || !bytes.is_multiple_of(elem) {
        return Err(format!(
            "{bytes} bytes are not a whole, non-zero number of {} ({elem} bytes each)",
            std::any::type_name::<T>()
        ));
    }
    if !bytes.is_multiple_of(granularity) {
        return Err(format!(
            "{bytes} bytes are not a multiple of NVSHMEM's heap granularity, {granularity} bytes \
             (NVSHMEM_CUMEM_GRANULARITY). Fix: allocate a multiple of it (Pgas::vmm_alloc rounds \
             up), or set NVSHMEM_CUMEM_GRANULARITY on every PE to a size the buffer is a multiple of"
        ));
    }
    Ok(())
}

/// Checks that `ptr..ptr + bytes` is CUDA VMM memory of GPU `device` that NVSHMEM can share
/// with the node's other processes: the driver hands out its allocation handle only for VMM
/// mappings (`cuMemRetainAllocationHandle`), whose properties say the GPU and export types.
fn vmm_check(ptr: CUdeviceptr, bytes: usize, device: usize) -> std::result::Result<(), String> {
    let mut handle: cu::CUmemGenericAllocationHandle = 0;
    // SAFETY: only queries the driver about the address; `handle` is a live local.
    let retained = unsafe { cu::cuMemRetainAllocationHandle(&mut handle, ptr as *mut c_void) };
    if retained != cu::CUresult::CUDA_SUCCESS {
        return Err(format!(
            "the memory at {ptr:#x} is not CUDA VMM memory ({retained:?} from \
             cuMemRetainAllocationHandle): NVSHMEM maps only memory made with cuMemCreate + \
             cuMemMap. Fix: allocate it with CUDA VMM (Pgas::vmm_alloc; PyTorch with \
             expandable_segments), or copy it into a tensor of pgas.alloc"
        ));
    }
    // SAFETY: CUmemAllocationProp is a plain C struct for which all zeroes is a value; the
    // driver fills it from the handle retained above.
    let mut prop: cu::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    // SAFETY: `handle` was retained above; `prop` is a live local.
    let props = unsafe { cu::cuMemGetAllocationPropertiesFromHandle(&mut prop, handle) };
    // SAFETY: releases the reference cuMemRetainAllocationHandle added, once.
    let _ = unsafe { cu::cuMemRelease(handle) };
    if props != cu::CUresult::CUDA_SUCCESS {
        return Err(format!(
            "reading the VMM allocation's properties at {ptr:#x} failed ({props:?})"
        ));
    }
    if prop.location.type_ != cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE
        || prop.location.id != device as i32
    {
        return Err(format!(
            "the VMM memory at {ptr:#x} lives on {:?} {}, not on this PE's GPU {device}. Fix: \
             register memory of the PE's own GPU",
            prop.location.type_, prop.location.id
        ));
    }
    // A bit set (cudarc's newtype holds the raw bits, so combinations are values).
    let fd = cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0;
    if prop.requestedHandleTypes.0 & fd == 0 {
        return Err(format!(
            "the VMM memory at {ptr:#x} cannot be exported as a POSIX file descriptor, which \
             NVSHMEM needs to map it into the node's other processes. Fix: create it with \
             requestedHandleTypes including CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"
        ));
    }
    let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: only queries the driver about the address; both outputs are live locals.
    let range = unsafe { cu::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) };
    if range != cu::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    // NVSHMEM maps the allocation's physical memory from its first byte (a VMM handle cannot be
    // mapped at an offset), so a pointer inside an allocation would register other data.
    if base != ptr {
        return Err(format!(
            "{ptr:#x} lies {} bytes into its VMM allocation (which starts at {base:#x}), and \
             NVSHMEM maps an allocation from its first byte. Fix: register the whole allocation, \
             from its start",
            ptr - base
        ));
    }
    if ptr.saturating_add(bytes as u64) > base + size as u64 {
        return Err(format!(
            "{bytes} bytes from {ptr:#x} run past the end of its VMM allocation ({size} bytes). \
             Fix: register at most the allocation"
        ));
    }
    Ok(())
}

/// Every PE's offer (its byte count, `u64::MAX` for a buffer it refused) must be the same:
/// else an `Err` on every PE, with this PE's own reason where it refused, and which PEs
/// refused or offered which size otherwise.
fn agreed(me: usize, offers: &[u64], local: std::result::Result<(), String>) -> Result<()> {
    let err = |reason: String| Error::InvalidConfig {
        name: "Pgas::register_external",
        value: format!("the buffers of {} PE(s)", offers.len()),
        reason,
    };
    local.map_err(|why| err(format!("on PE {me}: {why}")))?;
    let refused: Vec<usize> = (0..offers.len())
        .filter(|&i| offers[i] == u64::MAX)
        .collect();
    if !refused.is_empty() {
        return Err(err(format!(
            "PE(s) {refused:?} could not register their buffer (their errors say why), so no PE \
             registers. Fix: what those PEs' errors say"
        )));
    }
    if offers.windows(2).any(|w| w[0] != w[1]) {
        let sizes: Vec<String> = offers
            .iter()
            .enumerate()
            .map(|(pe, b)| format!("PE {pe} {b} bytes"))
            .collect();
        return Err(err(format!(
            "the sizes differ ({}); registration is symmetric. Fix: register a buffer of the \
             same size on every PE",
            sizes.join(", ")
        )));
    }
    Ok(())
}

/// A live registration: unregisters, then drops what keeps the memory alive.
struct Registration {
    mapped: CUdeviceptr,
    size: usize,
    inner: Arc<Inner>,
    /// The memory's owner (a [`VmmBuffer`], or another library's), dropped after `drop` below.
    _keep_alive: Box<dyn Send + Sync>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.live.untrack(self.mapped);
        // After a sticky CUDA error NVSHMEM would abort the process instead (see Inner).
        if inner.context_lost() || inner.bind().is_err() {
            return;
        }
        // SAFETY: registered once by `register_external`, unregistered once here.
        unsafe {
            inner
                .nvshmem
                .raw()
                .nvshmemx_buffer_unregister_symmetric(self.mapped as *mut c_void, self.size)
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
    fn registrations_are_refused_on_every_pe_with_the_reason() {
        let g = 2 << 20;
        check_whole::<u32>(g, 4, g).unwrap();
        let e = check_whole::<u32>(g + 4, 4, g).unwrap_err();
        assert!(e.contains("granularity") && e.contains("Fix:"), "{e}");
        let e = check_whole::<u64>(12, 8, g).unwrap_err();
        assert!(e.contains("whole"), "{e}");
        agreed(0, &[g as u64, g as u64], Ok(())).unwrap();
        let e = agreed(1, &[g as u64, u64::MAX], Err("not VMM".into())).unwrap_err();
        assert!(e.to_string().contains("on PE 1: not VMM"), "{e}");
        let e = agreed(0, &[g as u64, u64::MAX], Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("PE(s) [1]") && e.contains("no PE registers"),
            "{e}"
        );
        let e = agreed(0, &[g as u64, 2 * g as u64], Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("PE 0 2097152 bytes, PE 1 4194304 bytes") && e.contains("same size"),
            "{e}"
        );
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
