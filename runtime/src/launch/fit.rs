//! Whether a block fits its function on its GPU, and if not, why: registers for its size, shared
//! memory, more threads than the function's bound. Pure arithmetic on the limits the driver
//! reports ([`BlockLimits`]), so the diagnosis is tested without a GPU; `driver.rs` reads the
//! limits when a launch would not fit.

use crate::error::Error;

/// Blocks of at most this many threads never run out of registers on the GPUs NVSHMEM supports
/// (sm_70 and later: 65536 registers per SM and per block): a thread uses at most 255 registers,
/// allocated as 256, so a warp takes 8192 and 8 warps fit. A plain launch this small with no
/// dynamic shared memory therefore needs no attribute read (the common, cheap case).
pub(super) const ALWAYS_FITS_THREADS: u64 = 256;

/// Registers are allocated to a warp in units of 256, so to a thread in units of 8.
const REGS_PER_THREAD_UNIT: u32 = 256 / 32;

/// What the driver reports about a function and its GPU, for [`diagnose_block`]. Read only when
/// a block does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockLimits {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: the largest block the function can launch,
    /// given its registers and its `__launch_bounds__`.
    pub fn_max_threads: u32,
    /// `CU_FUNC_ATTRIBUTE_NUM_REGS`: registers per thread.
    pub regs_per_thread: u32,
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: static shared memory per block.
    pub static_shared: u32,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: the most dynamic shared memory a launch
    /// of the function may ask for.
    pub max_dynamic_shared: u32,
    /// The registers one block may use: the smaller of `MAX_REGISTERS_PER_MULTIPROCESSOR` and
    /// `MAX_REGISTERS_PER_BLOCK`.
    pub regs_per_sm: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`: shared memory per block for a
    /// function that opts in (pgas opts in when a launch asks for more than
    /// [`DEFAULT_DYNAMIC_SHARED`]).
    pub shared_optin: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`.
    pub threads_per_sm: u32,
}

/// Why a block does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockCause {
    /// More threads than the kernel is compiled for (`max_threads`, `__launch_bounds__`).
    Bound { bound: u32 },
    /// More threads than an SM runs at once.
    ThreadsPerSm { per_sm: u32 },
    /// More registers than an SM has: `per_thread` as the kernel uses them, `allocated` as the
    /// SM hands them out (whole warps, whole allocation units).
    Registers {
        per_thread: u32,
        allocated: u32,
        per_sm: u32,
    },
    /// More dynamic shared memory than the function may use per block.
    SharedMemory {
        static_bytes: u32,
        dynamic_bytes: u32,
        max_dynamic: u32,
        optin: u32,
    },
    /// The driver fits no block, and none of the above explains why.
    Unexplained {
        regs_per_thread: u32,
        static_bytes: u32,
    },
}

/// A block that does not fit: why, and the largest one that does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockDiagnosis {
    /// Threads per block asked for.
    pub threads: u32,
    pub cause: BlockCause,
    /// The largest block (threads) that fits; 0 when no block size does (shared memory).
    pub max_threads: u32,
}

/// Why blocks of `threads` threads with `dynamic_shared` bytes of dynamic shared memory do not
/// fit, from the function's and device's `limits`. Pure: both launch paths read the limits and
/// call this once they know (occupancy 0, or a failed attribute check) that the block does not
/// fit.
pub(crate) fn diagnose_block(
    threads: u32, dynamic_shared: u32, limits: &BlockLimits,
) -> BlockDiagnosis {
    let l = limits;
    let fits = l.fn_max_threads.min(l.threads_per_sm);
    let diagnosis = |cause, max_threads| BlockDiagnosis {
        threads,
        cause,
        max_threads,
    };
    if threads > l.threads_per_sm {
        return diagnosis(
            BlockCause::ThreadsPerSm {
                per_sm: l.threads_per_sm,
            },
            fits,
        );
    }
    if threads > l.fn_max_threads {
        let allocated = l.regs_per_thread.div_ceil(REGS_PER_THREAD_UNIT) * REGS_PER_THREAD_UNIT;
        // The driver's own limit is the truth; registers explain it when they overflow the SM,
        // else the function carries a smaller `__launch_bounds__`.
        let cause =
            if u64::from(allocated) * u64::from(whole_warps(threads)) > u64::from(l.regs_per_sm) {
                BlockCause::Registers {
                    per_thread: l.regs_per_thread,
                    allocated,
                    per_sm: l.regs_per_sm,
                }
            } else {
                BlockCause::Bound {
                    bound: l.fn_max_threads,
                }
            };
        return diagnosis(cause, fits);
    }
    if dynamic_shared > l.max_dynamic_shared {
        let cause = BlockCause::SharedMemory {
            static_bytes: l.static_shared,
            dynamic_bytes: dynamic_shared,
            max_dynamic: l.max_dynamic_shared,
            optin: l.shared_optin,
        };
        return diagnosis(cause, 0);
    }
    diagnosis(
        BlockCause::Unexplained {
            regs_per_thread: l.regs_per_thread,
            static_bytes: l.static_shared,
        },
        fits,
    )
}

/// `threads` rounded up to whole warps: what registers are allocated for.
fn whole_warps(threads: u32) -> u32 {
    threads.div_ceil(32) * 32
}

/// The most registers per thread with which blocks of `threads` fit in `per_sm` registers.
fn register_budget(threads: u32, per_sm: u32) -> u32 {
    let per_warp = per_sm / whole_warps(threads).div_ceil(32).max(1);
    per_warp / (REGS_PER_THREAD_UNIT * 32) * REGS_PER_THREAD_UNIT
}

impl BlockDiagnosis {
    /// The error, in words: the cause with its numbers, the largest block that fits, the fix.
    pub(crate) fn into_error(self, kernel: &str, collective: bool) -> Error {
        let t = self.threads;
        let max = self.max_threads;
        let (cause, fix) = match self.cause {
            BlockCause::Bound { bound } => (
                format!(
                    "it is compiled for blocks of at most {bound} threads (`max_threads = {bound}`, \
                     emitted as `__launch_bounds__({bound})`)"
                ),
                format!("launch at most {bound} threads per block, or raise the bound to {t}"),
            ),
            BlockCause::ThreadsPerSm { per_sm } => (
                format!("an SM of this GPU runs at most {per_sm} threads at once"),
                format!("launch at most {max} threads per block"),
            ),
            BlockCause::Registers {
                per_thread,
                allocated,
                per_sm,
            } => {
                let counted = whole_warps(t);
                let as_allocated = if allocated != per_thread {
                    format!(" (allocated as {allocated})")
                } else {
                    String::new()
                };
                let warps = if counted != t { " (whole warps)" } else { "" };
                (
                    format!(
                        "it uses {per_thread} registers per thread{as_allocated}, and {allocated} x \
                         {counted} threads{warps} = {} registers, more than the {per_sm} of an SM",
                        u64::from(allocated) * u64::from(counted)
                    ),
                    format!(
                        "launch at most {max} threads per block, or declare \
                         `#[pgas_kernel(max_threads = {t})]` (`__launch_bounds__({t})` in CUDA C) \
                         so the compiler keeps the kernel within {} registers per thread",
                        register_budget(t, per_sm)
                    ),
                )
            }
            BlockCause::SharedMemory {
                static_bytes,
                dynamic_bytes,
                max_dynamic,
                optin,
            } => {
                let optin = if u64::from(optin) > u64::from(static_bytes) + u64::from(max_dynamic) {
                    format!(" (this GPU's limit is {optin} bytes per block, static and dynamic together, but this kernel was not allowed more)")
                } else {
                    format!(" (this GPU's limit is {optin} bytes per block, static and dynamic together)")
                };
                (
                    format!(
                        "it asks for {dynamic_bytes} bytes of dynamic shared memory per block \
                         (besides {static_bytes} bytes of static), more than the {max_dynamic} \
                         this kernel may use{optin}"
                    ),
                    format!(
                        "ask for at most {max_dynamic} bytes of dynamic shared memory \
                         (`LaunchConfig::with_shared_mem`)"
                    ),
                )
            }
            BlockCause::Unexplained {
                regs_per_thread,
                static_bytes,
            } => (
                format!(
                    "the driver fits no block of this size on an SM, although its \
                     {regs_per_thread} registers per thread and {static_bytes} bytes of static \
                     shared memory are within the SM's limits"
                ),
                format!("launch at most {max} threads per block"),
            ),
        };
        Error::BlockDoesNotFit {
            kernel: kernel.to_owned(),
            threads: t,
            collective,
            cause,
            max_threads: max,
            fix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H100/H200 (65536 registers, 2048 threads, 227 KiB of opt-in shared memory per SM)
    /// running a function that uses `regs` registers and 1 KiB of static shared memory, which
    /// the driver says launches at most `fn_max` threads per block.
    fn hopper(regs: u32, fn_max: u32) -> BlockLimits {
        BlockLimits {
            fn_max_threads: fn_max,
            regs_per_thread: regs,
            static_shared: 1024,
            max_dynamic_shared: 48 * 1024 - 1024,
            regs_per_sm: 65536,
            shared_optin: 227 * 1024,
            threads_per_sm: 2048,
        }
    }

    #[test]
    fn register_case_names_the_registers_and_the_bound() {
        // Issue 13's kernel (a loop around `reduce_block`) as NVRTC builds it for sm_90: 131
        // registers per thread, so at most 15 warps of 136 allocated registers.
        let d = diagnose_block(1024, 0, &hopper(131, 480));
        assert_eq!(
            d,
            BlockDiagnosis {
                threads: 1024,
                cause: BlockCause::Registers {
                    per_thread: 131,
                    allocated: 136,
                    per_sm: 65536
                },
                max_threads: 480,
            }
        );
        let msg = d.into_error("nvshmem_ar", true).to_string();
        assert_eq!(
            msg,
            "kernel `nvshmem_ar` cannot run blocks of 1024 threads (its collective launch fits 0 \
             blocks per SM, whatever the grid): it uses 131 registers per thread (allocated as \
             136), and 136 x 1024 threads = 139264 registers, more than the 65536 of an SM. The \
             largest block that fits is 480 threads. Fix: launch at most 480 threads per block, \
             or declare `#[pgas_kernel(max_threads = 1024)]` (`__launch_bounds__(1024)` in CUDA \
             C) so the compiler keeps the kernel within 64 registers per thread"
        );
        let Error::BlockDoesNotFit {
            max_threads,
            collective,
            ..
        } = d.into_error("k", false)
        else {
            panic!("not BlockDoesNotFit")
        };
        assert_eq!((max_threads, collective), (480, false));
        // Without the rounding: 128 registers are allocated as they are.
        let msg = diagnose_block(1024, 0, &hopper(128, 512))
            .into_error("k", false)
            .to_string();
        assert!(
            msg.contains("128 registers per thread, and 128 x 1024 threads = 131072 registers"),
            "{msg}"
        );
        assert!(!msg.contains("collective"), "{msg}");
    }

    #[test]
    fn register_case_counts_as_the_sm_allocates() {
        // 85 registers are allocated as 88: 88 x 768 = 67584 > 65536, although 85 x 768 fits.
        let d = diagnose_block(768, 0, &hopper(85, 736));
        let msg = d.into_error("k", false).to_string();
        assert!(
            msg.contains("85 registers per thread (allocated as 88), and 88 x 768 threads = 67584"),
            "{msg}"
        );
        assert!(msg.contains("within 80 registers per thread"), "{msg}");
        // A block that is not whole warps is allocated as whole warps.
        let msg = diagnose_block(1000, 0, &hopper(72, 896))
            .into_error("k", false)
            .to_string();
        assert!(
            msg.contains("72 x 1024 threads (whole warps) = 73728"),
            "{msg}"
        );
    }

    #[test]
    fn shared_memory_case_names_the_bytes() {
        let d = diagnose_block(256, 64 * 1024, &hopper(32, 1024));
        assert_eq!(
            d.cause,
            BlockCause::SharedMemory {
                static_bytes: 1024,
                dynamic_bytes: 65536,
                max_dynamic: 48128,
                optin: 232448
            }
        );
        assert_eq!(d.max_threads, 0);
        let msg = d.into_error("k", true).to_string();
        for part in [
            "65536 bytes of dynamic shared memory per block (besides 1024 bytes of static), more than the 48128",
            "this GPU's limit is 232448 bytes per block, static and dynamic together, but this kernel was not allowed more",
            "No block size fits with this much shared memory",
            "Fix: ask for at most 48128 bytes of dynamic shared memory",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }

    #[test]
    fn shared_memory_over_the_device_limit_names_it() {
        // After the opt-in a kernel may use all the device gives a block, less its static
        // shared memory; asking for more names the device's limit.
        let limits = BlockLimits {
            max_dynamic_shared: 232448 - 1024,
            ..hopper(32, 1024)
        };
        let msg = diagnose_block(256, 300 * 1024, &limits)
            .into_error("k", false)
            .to_string();
        for part in [
            "307200 bytes of dynamic shared memory per block (besides 1024 bytes of static), more than the 231424",
            "this GPU's limit is 232448 bytes per block, static and dynamic together)",
            "Fix: ask for at most 231424 bytes of dynamic shared memory",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }

    #[test]
    fn threads_case_names_the_bound() {
        // Few registers, yet the function launches at most 256 threads: a compiled bound.
        let d = diagnose_block(512, 0, &hopper(32, 256));
        assert_eq!(d.cause, BlockCause::Bound { bound: 256 });
        assert_eq!(d.max_threads, 256);
        let msg = d.into_error("k", false).to_string();
        assert!(
            msg.contains("compiled for blocks of at most 256 threads (`max_threads = 256`"),
            "{msg}"
        );
        assert!(
            msg.contains("Fix: launch at most 256 threads per block, or raise the bound to 512")
        );

        // More threads than an SM holds (no current GPU: all hold at least 1024).
        let small_sm = BlockLimits {
            threads_per_sm: 512,
            ..hopper(32, 1024)
        };
        let d = diagnose_block(1024, 0, &small_sm);
        assert_eq!(d.cause, BlockCause::ThreadsPerSm { per_sm: 512 });
        assert_eq!(d.max_threads, 512);
    }

    #[test]
    fn unexplained_still_names_the_numbers() {
        let d = diagnose_block(256, 0, &hopper(40, 1024));
        assert_eq!(
            d.cause,
            BlockCause::Unexplained {
                regs_per_thread: 40,
                static_bytes: 1024
            }
        );
        let msg = d.into_error("k", true).to_string();
        assert!(
            msg.contains("40 registers per thread and 1024 bytes"),
            "{msg}"
        );
        assert!(
            msg.contains("launch at most 1024 threads per block"),
            "{msg}"
        );
    }

    #[test]
    fn small_blocks_always_fit_the_registers() {
        // The reasoning behind skipping the attribute read for small plain launches.
        let most = 255u32.div_ceil(REGS_PER_THREAD_UNIT) * REGS_PER_THREAD_UNIT;
        assert!(u64::from(most) * ALWAYS_FITS_THREADS <= 65536);
        assert_eq!(register_budget(1024, 65536), 64);
        assert_eq!(register_budget(512, 65536), 128);
    }
}
