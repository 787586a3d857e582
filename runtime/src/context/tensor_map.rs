//! Tensor maps for the copy engine (TMA): [`TensorMap`], built on the host with
//! `cuTensorMapEncodeTiled` from a 2-D row-major `CudaSlice`, `SymTensor` or another PE's copy of
//! a symmetric tensor, and passed to a kernel as a `&TensorMap<T>` parameter (by value, as a
//! `__grid_constant__`), where `tma_load_2d` copies its tiles into shared memory; maps built
//! from a `&mut` tensor (`tiled_2d_mut` ...) are `&mut TensorMap<T>` parameters `tma_store_2d` writes
//! through.
//!
//! Every rule the driver and the hardware impose is checked here, before the driver sees it, so
//! a bad shape is an [`Error::TensorMap`] that names the limit rather than a fault or garbage in
//! the kernel.

use std::marker::PhantomData;

use cudarc::driver::{sys, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::context::memory::SymRegion;
use crate::context::pgas::Pgas;
use crate::error::{Error, Result};
use crate::fp8::{e4m3, e5m2};

/// Element types the copy engine moves, with their `CUtensorMapDataType`.
pub trait TmaElem: Copy {
    /// The Rust type name, as kernel specs spell it.
    const RUST_NAME: &'static str;
    /// The driver's data type.
    const DATA_TYPE: sys::CUtensorMapDataType;
}

macro_rules! tma_elem {
    ($($t:ty => $name:literal, $dt:ident);* $(;)?) => {$(
        impl TmaElem for $t {
            const RUST_NAME: &'static str = $name;
            const DATA_TYPE: sys::CUtensorMapDataType = sys::CUtensorMapDataType::$dt;
        }
    )*};
}

tma_elem! {
    u8 => "u8", CU_TENSOR_MAP_DATA_TYPE_UINT8;
    u16 => "u16", CU_TENSOR_MAP_DATA_TYPE_UINT16;
    u32 => "u32", CU_TENSOR_MAP_DATA_TYPE_UINT32;
    i32 => "i32", CU_TENSOR_MAP_DATA_TYPE_INT32;
    u64 => "u64", CU_TENSOR_MAP_DATA_TYPE_UINT64;
    i64 => "i64", CU_TENSOR_MAP_DATA_TYPE_INT64;
    half::f16 => "f16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    half::bf16 => "bf16", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    // The driver has no FP8 data type: the copy engine moves bytes, and swizzles by bytes.
    e4m3 => "e4m3", CU_TENSOR_MAP_DATA_TYPE_UINT8;
    e5m2 => "e5m2", CU_TENSOR_MAP_DATA_TYPE_UINT8;
    f32 => "f32", CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    f64 => "f64", CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
}

/// How the copy engine arranges a tile's rows in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// Rows as they are (a tile row may be any multiple of 16 bytes).
    None,
    /// 16-byte chunks XOR-permuted within 32-byte rows.
    B32,
    /// ... within 64-byte rows.
    B64,
    /// ... within 128-byte rows, in 1024-byte atoms of 8 rows: what `wgmma_*` operands read
    /// (a tile row of exactly 128 bytes: 64 `bf16`).
    B128,
}

impl Swizzle {
    /// The swizzle span in bytes (a tile row may not be longer), if any.
    fn span(self) -> Option<usize> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    fn raw(self) -> sys::CUtensorMapSwizzle {
        match self {
            Swizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// The shape of a 2-D tensor map: the tensor (`rows` x `cols`, row-major, contiguous) and the
/// tile the copy engine moves (`box_rows` x `box_cols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile2d {
    /// Rows of the tensor.
    pub rows: usize,
    /// Columns of the tensor (elements of a row; rows are contiguous and follow each other).
    pub cols: usize,
    /// Rows of the tile one `tma_load_2d` moves.
    pub box_rows: usize,
    /// Columns of that tile.
    pub box_cols: usize,
    /// How the tile is laid out in shared memory (what `wgmma` descriptors expect).
    pub swizzle: Swizzle,
}

/// Most elements of one tile dimension (`cuTensorMapEncodeTiled`'s `boxDim` limit).
pub const MAX_BOX: usize = 256;

/// A TMA descriptor of a 2-D row-major tensor in device memory, for `tma_load_2d`. It borrows
/// the tensor, which must outlive every launch that uses the map; launches read it on the
/// launch stream like any other argument.
#[derive(Clone, Copy)]
pub struct TensorMap<'a, T> {
    raw: sys::CUtensorMap,
    tile: Tile2d,
    /// Built from a `&mut` tensor (or by the caller's promise): kernels may store through it.
    writable: bool,
    _tensor: PhantomData<&'a T>,
}

impl<T> std::fmt::Debug for TensorMap<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorMap")
            .field("tile", &self.tile)
            .finish()
    }
}

impl<'a, T: TmaElem> TensorMap<'a, T> {
    /// A map of `slice` as a `rows` x `cols` row-major tensor, moved in `box_rows` x `box_cols`
    /// tiles. The slice's device pointer is read on `stream` (the stream later launches use).
    pub fn tiled_2d(
        stream: &CudaStream, slice: &'a CudaSlice<T>, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        let (ptr, _sync) = slice.device_ptr(stream);
        // SAFETY: the pointer names `slice.len()` elements that live as long as `'a`.
        unsafe { Self::encode(ptr, slice.len(), tile, false) }
    }

    /// [`TensorMap::tiled_2d`] of a tensor the kernel also writes through the map
    /// (`tma_store_2d`, `tma_reduce_add_2d`, a `&mut TensorMap<T>` parameter): the map holds
    /// the exclusive borrow for as long as it lives.
    pub fn tiled_2d_mut(
        stream: &CudaStream, slice: &'a mut CudaSlice<T>, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        Self::written(stream, slice, tile, Rows::Whole)
    }

    /// A map of `slice`, which the kernel writes, by the rows' rule given.
    fn written(
        stream: &CudaStream, slice: &'a mut CudaSlice<T>, tile: Tile2d, rows: Rows,
    ) -> Result<TensorMap<'a, T>> {
        let len = slice.len();
        let (ptr, _sync) = slice.device_ptr_mut(stream);
        // SAFETY: the pointer names `len` elements, exclusively borrowed for `'a`.
        unsafe { Self::encode_rows(ptr, len, tile, true, rows) }
    }

    /// A map of this PE's copy of a symmetric tensor (or view).
    pub fn tiled_2d_sym<S: SymRegion<T> + ?Sized>(
        sym: &'a S, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        // SAFETY: a symmetric region's pointer names `len()` elements that live as long as it.
        unsafe { Self::encode(sym.as_device_ptr(), sym.len(), tile, false) }
    }

    /// [`TensorMap::tiled_2d_sym`] of a symmetric tensor the kernel writes through the map.
    pub fn tiled_2d_sym_mut<S: SymRegion<T> + ?Sized>(
        sym: &'a mut S, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        // SAFETY: as tiled_2d_sym; the region is exclusively borrowed for `'a`.
        unsafe { Self::encode(sym.as_device_ptr(), sym.len(), tile, true) }
    }

    /// A map of PE `pe`'s copy of a symmetric tensor, read over NVLink: the copy engine fetches
    /// remote tiles like local ones. An `Err` when `pe` is out of range or its memory is not
    /// mapped into this GPU's address space (`x.has_peer(pe)` in a kernel says the same).
    pub fn tiled_2d_peer<S: SymRegion<T> + ?Sized>(
        pgas: &Pgas, sym: &'a S, pe: usize, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        Self::peer(pgas, sym, pe, tile, false)
    }

    /// [`TensorMap::tiled_2d_peer`] for stores: a kernel writes (`tma_store_2d`) or adds
    /// (`tma_reduce_add_2d`) tiles into PE `pe`'s copy over NVLink. That PE must order its own
    /// reads after these writes (a signal or barrier after the kernel's `tma_store_wait`).
    pub fn tiled_2d_peer_mut<S: SymRegion<T> + ?Sized>(
        pgas: &Pgas, sym: &'a mut S, pe: usize, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        Self::peer(pgas, sym, pe, tile, true)
    }

    fn peer<S: SymRegion<T> + ?Sized>(
        pgas: &Pgas, sym: &S, pe: usize, tile: Tile2d, writable: bool,
    ) -> Result<TensorMap<'a, T>> {
        let bad = |reason: String| Err(Error::TensorMap { reason });
        if pe >= pgas.n_pes() {
            return bad(format!(
                "PE {pe} is out of range: there are {} PEs",
                pgas.n_pes()
            ));
        }
        // SAFETY: nvshmem_ptr only translates an address of the symmetric heap.
        let remote = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_ptr(sym.as_device_ptr() as *const std::ffi::c_void, pe as i32)
        };
        if remote.is_null() {
            return bad(format!(
                "PE {pe}'s memory is not mapped on PE {} (no NVLink/P2P path): fetch the tile \
                 with get_nbi_block instead",
                pgas.my_pe()
            ));
        }
        // SAFETY: the peer's copy has the same length and lives as long as the symmetric tensor.
        unsafe { Self::encode(remote as sys::CUdeviceptr, sym.len(), tile, writable) }
    }

    /// [`TensorMap::tiled_2d`] whose last tile along the rows may run past the tensor's end
    /// (`box_rows` need not divide `rows`): the copy engine fills the rows past it with zeros.
    /// For kernels that mask those rows themselves, as attention does over sequences of any
    /// length; `box_cols` still divides `cols`.
    pub fn tiled_2d_ragged(
        stream: &CudaStream, slice: &'a CudaSlice<T>, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        let (ptr, _sync) = slice.device_ptr(stream);
        // SAFETY: the pointer names `slice.len()` elements that live as long as `'a`.
        unsafe { Self::encode_rows(ptr, slice.len(), tile, false, Rows::Ragged) }
    }

    /// [`TensorMap::tiled_2d_ragged`] of a tensor the kernel also writes through the map: the
    /// copy engine stores nothing past the tensor's last row (a GEMM's C of any M rows).
    pub fn tiled_2d_ragged_mut(
        stream: &CudaStream, slice: &'a mut CudaSlice<T>, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        Self::written(stream, slice, tile, Rows::Ragged)
    }

    /// [`TensorMap::from_device_ptr`] whose last tile along the rows may run past the tensor's
    /// end, as [`TensorMap::tiled_2d_ragged`]'s.
    ///
    /// # Safety
    /// As [`TensorMap::from_device_ptr`].
    pub unsafe fn from_device_ptr_ragged(
        ptr: sys::CUdeviceptr, len: usize, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        // SAFETY: the caller's contract (which covers writes through the map).
        unsafe { Self::encode_rows(ptr, len, tile, true, Rows::Ragged) }
    }

    /// A map of `len` elements at the device address `ptr`: for memory that a kernel also takes
    /// by `&mut` while the copy engine reads it through the map (a gathered buffer that peers'
    /// `put_signal`s fill as the kernel's TMA loads consume the parts already signalled), which a
    /// map borrowed from the tensor cannot express. The tile is checked as in
    /// [`TensorMap::tiled_2d`].
    ///
    /// # Safety
    /// `ptr` must name `len` elements of `T` on this GPU that stay allocated while the map is
    /// used, and the kernel must order its writes and the map's reads of the same elements
    /// itself (signals, barriers).
    pub unsafe fn from_device_ptr(
        ptr: sys::CUdeviceptr, len: usize, tile: Tile2d,
    ) -> Result<TensorMap<'a, T>> {
        // SAFETY: the caller's contract (which covers writes through the map).
        unsafe { Self::encode(ptr, len, tile, true) }
    }

    /// Checks `tile` against the driver's and the hardware's rules, then encodes.
    ///
    /// # Safety
    /// `ptr` must name `len` elements of `T` that live as long as `'a`.
    unsafe fn encode(
        ptr: sys::CUdeviceptr, len: usize, tile: Tile2d, writable: bool,
    ) -> Result<TensorMap<'a, T>> {
        // SAFETY: the caller's contract.
        unsafe { Self::encode_rows(ptr, len, tile, writable, Rows::Whole) }
    }

    /// [`TensorMap::encode`], the rows' rule given.
    ///
    /// # Safety
    /// As [`TensorMap::encode`].
    unsafe fn encode_rows(
        ptr: sys::CUdeviceptr, len: usize, tile: Tile2d, writable: bool, rows: Rows,
    ) -> Result<TensorMap<'a, T>> {
        check(ptr, len, std::mem::size_of::<T>(), &tile, rows)?;
        let elem = std::mem::size_of::<T>();
        let dims = [tile.cols as u64, tile.rows as u64];
        let strides = [(tile.cols * elem) as u64];
        let boxes = [tile.box_cols as u32, tile.box_rows as u32];
        let unit = [1u32, 1];
        let mut raw = sys::CUtensorMap { opaque: [0; 16] };
        // SAFETY: every array has the length rank 2 needs; `check` enforced the driver's rules.
        let rc = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut raw,
                T::DATA_TYPE,
                2,
                ptr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                unit.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                tile.swizzle.raw(),
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if rc != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::TensorMap {
                reason: format!("cuTensorMapEncodeTiled refused {tile:?}: {rc:?}"),
            });
        }
        Ok(TensorMap {
            raw,
            tile,
            writable,
            _tensor: PhantomData,
        })
    }

    /// Whether kernels may write through the map (built by a `_mut` constructor or
    /// [`TensorMap::from_device_ptr`]).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The shape it was built with.
    pub fn tile(&self) -> Tile2d {
        self.tile
    }

    /// Bytes of one tile: what `mbarrier_arrive_expect_tx` expects for one `tma_load_2d`.
    pub fn tile_bytes(&self) -> u32 {
        (self.tile.box_rows * self.tile.box_cols * std::mem::size_of::<T>()) as u32
    }

    /// A map with these descriptor bytes, for tests of argument packing (no driver).
    #[cfg(test)]
    pub(crate) fn from_raw(opaque: [u64; 16], tile: Tile2d) -> TensorMap<'a, T> {
        TensorMap {
            raw: sys::CUtensorMap { opaque },
            tile,
            writable: false,
            _tensor: PhantomData,
        }
    }

    /// The kernel-parameter form: the 128 descriptor bytes, then `box_rows << 32 | box_cols`.
    pub(crate) fn words(&self) -> ([u64; 16], u64) {
        let boxes = ((self.tile.box_rows as u64) << 32) | self.tile.box_cols as u64;
        (self.raw.opaque, boxes)
    }
}

/// Whether a map's tiles must divide the tensor's rows: most kernels have no edge handling
/// (whole tiles), attention masks the rows past the end (ragged).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rows {
    Whole,
    Ragged,
}

/// The rules of `cuTensorMapEncodeTiled` and of the kernels that read the tiles, for a tensor of
/// `len` elements of `elem` bytes at `ptr`.
fn check(ptr: u64, len: usize, elem: usize, t: &Tile2d, rows: Rows) -> Result<()> {
    let bad = |reason: String| Err(Error::TensorMap { reason });
    if t.rows == 0 || t.cols == 0 || t.rows.checked_mul(t.cols) != Some(len) {
        return bad(format!(
            "a {} x {} tensor needs {} elements, but the buffer has {len}",
            t.rows,
            t.cols,
            t.rows.saturating_mul(t.cols)
        ));
    }
    for (what, b, n) in [
        ("box_rows", t.box_rows, t.rows),
        ("box_cols", t.box_cols, t.cols),
    ] {
        if b == 0 || b > MAX_BOX {
            return bad(format!(
                "{what} = {b}: a tile dimension is 1..={MAX_BOX} elements"
            ));
        }
        if n % b != 0 && !(what == "box_rows" && rows == Rows::Ragged) {
            return bad(format!(
                "{what} = {b} does not divide the tensor's {n}: every tile must be whole"
            ));
        }
    }
    if !ptr.is_multiple_of(16) {
        return bad(format!(
            "the tensor's address {ptr:#x} is not 16-byte aligned"
        ));
    }
    if !(t.cols * elem).is_multiple_of(16) {
        return bad(format!(
            "a row of {} elements is {} bytes: the copy engine needs rows of a multiple of 16 bytes",
            t.cols,
            t.cols * elem
        ));
    }
    let row_bytes = t.box_cols * elem;
    if !row_bytes.is_multiple_of(16) {
        return bad(format!(
            "a tile row of {} elements is {row_bytes} bytes, not a multiple of 16",
            t.box_cols
        ));
    }
    if let Some(span) = t.swizzle.span() {
        if row_bytes > span {
            return bad(format!(
                "a tile row of {row_bytes} bytes is longer than the {span}-byte swizzle: use \
                 box_cols <= {}",
                span / elem
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(rows: usize, cols: usize, br: usize, bc: usize, swizzle: Swizzle) -> Tile2d {
        Tile2d {
            rows,
            cols,
            box_rows: br,
            box_cols: bc,
            swizzle,
        }
    }

    fn reason(r: Result<()>) -> String {
        match r {
            Err(Error::TensorMap { reason }) => reason,
            other => panic!("expected a TensorMap error, got {other:?}"),
        }
    }

    #[test]
    fn a_map_from_a_device_pointer_is_checked_before_the_driver() {
        // Both refusals come from `check`, before cuTensorMapEncodeTiled (no GPU needed).
        let t = tile(256, 64, 128, 64, Swizzle::B128);
        // SAFETY: nothing is dereferenced: the checks refuse before encoding.
        let e = unsafe { TensorMap::<half::bf16>::from_device_ptr(0x1008, 256 * 64, t) };
        assert!(
            matches!(&e, Err(Error::TensorMap { reason }) if reason.contains("not 16-byte aligned")),
            "{:?}",
            e.err()
        );
        // SAFETY: as above.
        let e = unsafe { TensorMap::<half::bf16>::from_device_ptr(0x1000, 255 * 64, t) };
        assert!(
            matches!(&e, Err(Error::TensorMap { reason }) if reason.contains("needs 16384 elements")),
            "{:?}",
            e.err()
        );
    }

    #[test]
    fn accepts_a_gemm_operand() {
        check(
            0x1000,
            4096 * 4096,
            2,
            &tile(4096, 4096, 128, 64, Swizzle::B128),
            Rows::Whole,
        )
        .unwrap();
    }

    #[test]
    fn refuses_what_the_hardware_cannot_do() {
        let r = reason(check(
            0x1000,
            500 * 64,
            2,
            &tile(500, 64, 128, 64, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(
            r.contains("box_rows = 128 does not divide the tensor's 500"),
            "{r}"
        );
        // Ragged rows (attention's maps): the last tile may run past the end, columns may not.
        check(
            0x1000,
            500 * 64,
            2,
            &tile(500, 64, 128, 64, Swizzle::B128),
            Rows::Ragged,
        )
        .unwrap();
        let r = reason(check(
            0x1000,
            500 * 96,
            2,
            &tile(500, 96, 128, 64, Swizzle::B128),
            Rows::Ragged,
        ));
        assert!(r.contains("box_cols = 64 does not divide"), "{r}");
        let r = reason(check(
            0x1000,
            4096,
            2,
            &tile(64, 64, 64, 128, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(r.contains("box_cols = 128 does not divide"), "{r}");
        let r = reason(check(
            0x1000,
            256 * 128,
            2,
            &tile(256, 128, 64, 128, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(r.contains("longer than the 128-byte swizzle"), "{r}");
        let r = reason(check(
            0x1000,
            512 * 512,
            2,
            &tile(512, 512, 512, 64, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(r.contains("1..=256"), "{r}");
        let r = reason(check(
            0x1008,
            64 * 64,
            2,
            &tile(64, 64, 64, 64, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(r.contains("not 16-byte aligned"), "{r}");
        let r = reason(check(
            0x1000,
            12 * 64,
            2,
            &tile(64, 12, 64, 12, Swizzle::None),
            Rows::Whole,
        ));
        assert!(r.contains("multiple of 16 bytes"), "{r}");
        let r = reason(check(
            0x1000,
            100,
            2,
            &tile(64, 64, 64, 64, Swizzle::B128),
            Rows::Whole,
        ));
        assert!(
            r.contains("needs 4096 elements, but the buffer has 100"),
            "{r}"
        );
    }
}
