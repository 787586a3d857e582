//! The 8-bit floats of the OCP FP8 formats as host types: [`e4m3`] and [`e5m2`], one byte each,
//! the element types of `CudaSlice`/`SymTensor` buffers that kernels see as CUDA's
//! `__nv_fp8_e4m3` / `__nv_fp8_e5m2`.
//!
//! Conversions from `f32`/`f64` round to nearest, ties to even, and saturate: a finite value
//! beyond the largest one, or an infinity, becomes the largest finite value of its sign (CUDA's
//! `__NV_SATFINITE`, what the `__nv_fp8_*` constructors and kernels' `as` casts do, so host and
//! device agree bit for bit). NaN stays NaN. Conversions to `f32`/`f64` are exact.
//!
//! They are storage types: to compute, convert to `f32` (`x.to_f32()`, `f32::from(x)`).

use std::cmp::Ordering;
use std::fmt;

/// A format's constants: exponent bias, mantissa bits, the largest finite encoding, the NaN a
/// conversion produces.
struct Format {
    bias: i32,
    man_bits: u32,
    max: u8,
    nan: u8,
}

const E4M3: Format = Format {
    bias: 7,
    man_bits: 3,
    max: 0x7e,
    nan: 0x7f,
};
const E5M2: Format = Format {
    bias: 15,
    man_bits: 2,
    max: 0x7b,
    nan: 0x7e,
};

/// `2^n` exactly, for the exponents these formats reach.
fn pow2(n: i32) -> f64 {
    f64::from_bits(((n + 1023) as u64) << 52)
}

impl Format {
    /// The value of a finite, non-NaN encoding's magnitude bits (`0..=max`).
    fn value(&self, abs: u8) -> f64 {
        let exp = i32::from(abs >> self.man_bits);
        let man = f64::from(abs & ((1 << self.man_bits) - 1));
        let one = f64::from(1u8 << self.man_bits);
        if exp == 0 {
            man * pow2(1 - self.bias - self.man_bits as i32)
        } else {
            (one + man) * pow2(exp - self.bias - self.man_bits as i32)
        }
    }

    /// `x` rounded to nearest even and saturated, as an encoding.
    fn encode(&self, x: f64) -> u8 {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        if x.is_nan() {
            return self.nan | sign;
        }
        let a = x.abs();
        // Half an ulp above the largest finite value and beyond (infinities included): the
        // largest finite value (the tie itself rounds to it in E4M3, whose next encoding is NaN,
        // and saturates in E5M2, whose next is infinity).
        let max = self.value(self.max);
        let top_ulp = pow2(((self.max >> self.man_bits) as i32) - self.bias - self.man_bits as i32);
        if a >= max + top_ulp / 2.0 {
            return self.max | sign;
        }
        let min_normal = pow2(1 - self.bias);
        let bits = if a < min_normal {
            // Subnormal: multiples of the smallest one; rounding up to `1 << man_bits` gives
            // the smallest normal's encoding, as it should.
            let q = pow2(1 - self.bias - self.man_bits as i32);
            (a / q).round_ties_even() as u32
        } else {
            let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
            let q = pow2(e - self.man_bits as i32);
            // In 2^m ..= 2^(m+1); the top carries into the exponent field.
            let m = (a / q).round_ties_even() as u32;
            (((e + self.bias) as u32) << self.man_bits) + m - (1 << self.man_bits)
        };
        bits as u8 | sign
    }
}

macro_rules! fp8_type {
    ($name:ident, $fmt:ident, $cuda:literal, $what:literal) => {
        #[doc = concat!("An 8-bit float, ", $what, " (CUDA's `", $cuda, "`).")]
        ///
        /// Conversions from wider floats round to nearest even and saturate to the largest finite
        /// value, as CUDA's `__NV_SATFINITE` conversion does.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// Zero.
            pub const ZERO: $name = $name(0);
            /// The largest finite value.
            pub const MAX: $name = $name($fmt.max);
            /// The most negative finite value.
            pub const MIN: $name = $name($fmt.max | 0x80);
            /// The smallest positive normal value.
            pub const MIN_POSITIVE: $name = $name(1 << $fmt.man_bits);
            /// The smallest positive (subnormal) value.
            pub const MIN_POSITIVE_SUBNORMAL: $name = $name(1);
            /// Not a number.
            pub const NAN: $name = $name($fmt.nan);

            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> $name {
                $name(bits)
            }

            /// The bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// `x` rounded to nearest even, saturated to the finite range (NaN stays NaN).
            pub fn from_f32(x: f32) -> $name {
                // f32 -> f64 is exact, so this is one rounding.
                $name($fmt.encode(f64::from(x)))
            }

            /// `x` rounded to nearest even, saturated to the finite range (NaN stays NaN).
            pub fn from_f64(x: f64) -> $name {
                $name($fmt.encode(x))
            }

            /// The value as `f32` (exact).
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }

            /// The value as `f64` (exact).
            pub fn to_f64(self) -> f64 {
                if self.is_nan() {
                    return f64::NAN;
                }
                let abs = self.0 & 0x7f;
                let v = if self.is_infinite() {
                    f64::INFINITY
                } else {
                    $fmt.value(abs)
                };
                if self.0 & 0x80 != 0 {
                    -v
                } else {
                    v
                }
            }

            /// Whether this is NaN.
            pub fn is_nan(self) -> bool {
                fp8_nan!($fmt, self.0 & 0x7f)
            }

            /// Whether this is an infinity (only E5M2 has them).
            pub fn is_infinite(self) -> bool {
                $fmt.man_bits == 2 && self.0 & 0x7f == 0x7c
            }

            /// Whether this is neither NaN nor an infinity.
            pub fn is_finite(self) -> bool {
                !self.is_nan() && !self.is_infinite()
            }
        }

        impl From<$name> for f32 {
            fn from(x: $name) -> f32 {
                x.to_f32()
            }
        }

        impl From<$name> for f64 {
            fn from(x: $name) -> f64 {
                x.to_f64()
            }
        }

        /// By value, as `f32` compares: NaN equals nothing, `-0 == +0`.
        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                self.to_f32() == other.to_f32()
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &$name) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        // SAFETY: one byte, `repr(transparent)` over `u8`, like CUDA's `__nv_fp8_*` (a struct
        // of one `unsigned char`); every bit pattern is a value, zero is +0.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        // SAFETY: all-zero bits are +0.
        unsafe impl cudarc::driver::ValidAsZeroBits for $name {}
    };
}

/// NaN encodings: E4M3 has one of each sign (`S.1111.111`), E5M2 those with the top exponent
/// and a non-zero mantissa.
macro_rules! fp8_nan {
    (E4M3, $abs:expr) => {
        $abs == 0x7f
    };
    (E5M2, $abs:expr) => {
        $abs > 0x7c
    };
}

fp8_type!(
    e4m3,
    E4M3,
    "__nv_fp8_e4m3",
    "E4M3: 4 exponent bits, 3 mantissa bits, finite only (largest 448)"
);
fp8_type!(
    e5m2,
    E5M2,
    "__nv_fp8_e5m2",
    "E5M2: 5 exponent bits, 2 mantissa bits, with infinities (largest finite 57344)"
);

impl e5m2 {
    /// Positive infinity (never the result of a conversion, which saturates).
    pub const INFINITY: e5m2 = e5m2(0x7c);
    /// Negative infinity.
    pub const NEG_INFINITY: e5m2 = e5m2(0xfc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_exact_values() {
        for (x, bits) in [
            (0.0f32, 0x00u8),
            (1.0, 0x38),
            (-1.0, 0xb8),
            (0.5, 0x30),
            (1.125, 0x39),
            (448.0, 0x7e),
            (-448.0, 0xfe),
            (2f32.powi(-6), 0x08),
            (2f32.powi(-9), 0x01),
            (7.0 * 2f32.powi(-9), 0x07),
            (240.0, 0x77),
        ] {
            assert_eq!(e4m3::from_f32(x).to_bits(), bits, "{x}");
            assert_eq!(e4m3::from_bits(bits).to_f32(), x, "{bits:#x}");
        }
        assert_eq!(e4m3::from_f32(-0.0).to_bits(), 0x80);
        assert_eq!(e4m3::MAX.to_f32(), 448.0);
        assert_eq!(e4m3::MIN.to_f32(), -448.0);
        assert_eq!(e4m3::MIN_POSITIVE.to_f32(), 2f32.powi(-6));
        assert_eq!(e4m3::MIN_POSITIVE_SUBNORMAL.to_f32(), 2f32.powi(-9));
    }

    #[test]
    fn e5m2_exact_values() {
        for (x, bits) in [
            (0.0f32, 0x00u8),
            (1.0, 0x3c),
            (-2.0, 0xc0),
            (1.5, 0x3e),
            (57344.0, 0x7b),
            (2f32.powi(-14), 0x04),
            (2f32.powi(-16), 0x01),
            (3.0 * 2f32.powi(-16), 0x03),
        ] {
            assert_eq!(e5m2::from_f32(x).to_bits(), bits, "{x}");
            assert_eq!(e5m2::from_bits(bits).to_f32(), x, "{bits:#x}");
        }
        assert_eq!(e5m2::INFINITY.to_f32(), f32::INFINITY);
        assert_eq!(e5m2::NEG_INFINITY.to_f32(), f32::NEG_INFINITY);
        assert!(e5m2::INFINITY.is_infinite() && !e5m2::INFINITY.is_nan());
    }

    #[test]
    fn nan() {
        assert!(e4m3::from_f32(f32::NAN).is_nan());
        assert!(e4m3::from_f32(-f32::NAN).is_nan());
        assert_eq!(e4m3::from_f32(f32::NAN).to_bits() & 0x7f, 0x7f);
        assert!(e4m3::from_bits(0xff).to_f32().is_nan());
        assert!(e5m2::from_f32(f32::NAN).is_nan());
        for b in [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff] {
            assert!(e5m2::from_bits(b).is_nan() && e5m2::from_bits(b).to_f32().is_nan());
        }
        assert!(e4m3::NAN != e4m3::NAN);
        // 0x7e is E4M3's largest finite value, not NaN.
        assert!(!e4m3::from_bits(0x7e).is_nan());
    }

    #[test]
    fn saturation() {
        for x in [449.0f32, 464.0, 465.0, 1e6, f32::INFINITY, f32::MAX] {
            assert_eq!(e4m3::from_f32(x).to_bits(), 0x7e, "{x}");
            assert_eq!(e4m3::from_f32(-x).to_bits(), 0xfe, "{x}");
        }
        for x in [57345.0f32, 61439.0, 61440.0, 1e9, f32::INFINITY] {
            assert_eq!(e5m2::from_f32(x).to_bits(), 0x7b, "{x}");
            assert_eq!(e5m2::from_f32(-x).to_bits(), 0xfb, "{x}");
        }
        assert_eq!(e4m3::from_f64(f64::MAX).to_bits(), 0x7e);
    }

    #[test]
    fn round_to_nearest_even() {
        // Between 1 (0x38) and 1.125 (0x39): the tie goes to the even 1, above it up.
        assert_eq!(e4m3::from_f32(1.0625).to_bits(), 0x38);
        assert_eq!(e4m3::from_f32(1.0626).to_bits(), 0x39);
        assert_eq!(e4m3::from_f32(1.0624).to_bits(), 0x38);
        // Between 1.125 (0x39) and 1.25 (0x3a): the tie goes to the even 1.25.
        assert_eq!(e4m3::from_f32(1.1875).to_bits(), 0x3a);
        // Mantissa carry into the exponent: 1.9375 is the tie of 1.875 (odd 0x3f) and 2.
        assert_eq!(e4m3::from_f32(1.9375).to_bits(), 0x40);
        // Subnormals: half the smallest rounds to 0 (even), a bit more to the smallest.
        assert_eq!(e4m3::from_f32(2f32.powi(-10)).to_bits(), 0x00);
        assert_eq!(e4m3::from_f32(1.01 * 2f32.powi(-10)).to_bits(), 0x01);
        assert_eq!(e4m3::from_f32(1.5 * 2f32.powi(-9)).to_bits(), 0x02);
        // The largest subnormal rounding up to the smallest normal.
        assert_eq!(e4m3::from_f32(7.5 * 2f32.powi(-9)).to_bits(), 0x08);
        // E5M2: 1.125 is the tie of 1 (0x3c) and 1.25 (0x3d).
        assert_eq!(e5m2::from_f32(1.125).to_bits(), 0x3c);
        assert_eq!(e5m2::from_f32(1.375).to_bits(), 0x3e);
        assert_eq!(e5m2::from_f32(-1.3).to_bits(), 0xbd);
        // E4M3's largest: 464 is the tie of 448 (even) and NaN's encoding: 448.
        assert_eq!(e4m3::from_f32(460.0).to_bits(), 0x7e);
    }

    #[test]
    fn every_encoding_round_trips() {
        for b in 0..=255u8 {
            for (x, back) in [
                (
                    e4m3::from_bits(b).to_f32(),
                    e4m3::from_f32(e4m3::from_bits(b).to_f32()).to_bits(),
                ),
                (
                    e5m2::from_bits(b).to_f32(),
                    e5m2::from_f32(e5m2::from_bits(b).to_f32()).to_bits(),
                ),
            ] {
                if !x.is_nan() && !x.is_infinite() {
                    assert_eq!(back, b, "{b:#x}");
                }
            }
        }
    }

    #[test]
    fn rounding_matches_nearest_by_search() {
        // Every value between neighbours: nearest wins, ties go to the even encoding.
        for b in 0..0x7eu8 {
            let (lo, hi) = (e4m3::from_bits(b).to_f64(), e4m3::from_bits(b + 1).to_f64());
            let mid = (lo + hi) / 2.0;
            assert_eq!(
                e4m3::from_f64(mid).to_bits(),
                if b % 2 == 0 { b } else { b + 1 }
            );
            assert_eq!(e4m3::from_f64(lo + (hi - lo) * 0.25).to_bits(), b);
            assert_eq!(e4m3::from_f64(lo + (hi - lo) * 0.75).to_bits(), b + 1);
        }
        for b in 0..0x7bu8 {
            let (lo, hi) = (e5m2::from_bits(b).to_f64(), e5m2::from_bits(b + 1).to_f64());
            let mid = (lo + hi) / 2.0;
            assert_eq!(
                e5m2::from_f64(mid).to_bits(),
                if b % 2 == 0 { b } else { b + 1 }
            );
        }
    }
}
