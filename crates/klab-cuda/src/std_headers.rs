//! The C and C++ standard headers NVRTC does not ship, as klab gives them to it.
//!
//! nvcc compiles a `.cu` file with the host compiler's headers, so kernels from real projects
//! include `<cstdint>`, `<stdio.h>`, `<cfloat>` or `<cmath>` as a matter of course. NVRTC has
//! no such folder: `#include <cstdint>` is a "cannot open source file" error, and a correct
//! kernel was refused at its first line. NVRTC already declares in device code what these
//! headers would (printf, assert, malloc, memcpy, the math functions, size_t); what it lacks
//! is the headers themselves, the fixed-width integer types, the limits' and math's macros
//! and the `std::` names. [`STD_HEADERS`] supplies exactly those, and nothing else: a header
//! of the C++ library proper (`<type_traits>`, `<limits>`, `<algorithm>`) is not imitated,
//! and its include still fails with NVRTC's message, to which [`hint`] adds where such code
//! can go instead.
//!
//! They are files in a folder of their own ([`folder`]), written for each compile and passed
//! as the last `-I`, as a compiler's system headers come last: a header of the project's
//! named like one of them (beside the file that includes it, or in an include folder) is
//! found first, as nvcc would find it. (NVRTC takes an in-memory header before any file, so
//! klab does not give them that way.) The folder's path is not among the options a cache
//! key or a receipt records; [`digest`] is in the key.
//!
//! The types follow libcu++'s under NVRTC (`int64_t` is `long long`, where glibc's is
//! `long`), so a kernel that also includes `<cuda/std/cstdint>` declares each type once more
//! as the same type.

use klab_core::artifact::sha256_hex;

const STDINT: &str = r#"#pragma once
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef signed short int16_t;
typedef unsigned short uint16_t;
typedef signed int int32_t;
typedef unsigned int uint32_t;
typedef signed long long int64_t;
typedef unsigned long long uint64_t;
typedef int8_t int_least8_t;
typedef uint8_t uint_least8_t;
typedef int16_t int_least16_t;
typedef uint16_t uint_least16_t;
typedef int32_t int_least32_t;
typedef uint32_t uint_least32_t;
typedef int64_t int_least64_t;
typedef uint64_t uint_least64_t;
typedef int8_t int_fast8_t;
typedef uint8_t uint_fast8_t;
typedef int16_t int_fast16_t;
typedef uint16_t uint_fast16_t;
typedef int32_t int_fast32_t;
typedef uint32_t uint_fast32_t;
typedef int64_t int_fast64_t;
typedef uint64_t uint_fast64_t;
typedef int64_t intptr_t;
typedef uint64_t uintptr_t;
typedef int64_t intmax_t;
typedef uint64_t uintmax_t;
#ifndef INT8_MAX
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32767 - 1)
#define INT16_MAX 32767
#define UINT16_MAX 65535
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define UINT32_MAX 4294967295U
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT64_MAX 18446744073709551615ULL
#define INTPTR_MIN INT64_MIN
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define INTMAX_MIN INT64_MIN
#define INTMAX_MAX INT64_MAX
#define UINTMAX_MAX UINT64_MAX
#define PTRDIFF_MIN (-9223372036854775807L - 1)
#define PTRDIFF_MAX 9223372036854775807L
#define SIZE_MAX 18446744073709551615UL
#define INT8_C(x) x
#define INT16_C(x) x
#define INT32_C(x) x
#define INT64_C(x) x##LL
#define UINT8_C(x) x
#define UINT16_C(x) x
#define UINT32_C(x) x##U
#define UINT64_C(x) x##ULL
#define INTMAX_C(x) x##LL
#define UINTMAX_C(x) x##ULL
#endif
"#;

const CSTDINT: &str = r#"#pragma once
#include <stdint.h>
namespace std {
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t;
using ::int32_t; using ::uint32_t; using ::int64_t; using ::uint64_t;
using ::int_least8_t; using ::uint_least8_t; using ::int_least16_t; using ::uint_least16_t;
using ::int_least32_t; using ::uint_least32_t; using ::int_least64_t; using ::uint_least64_t;
using ::int_fast8_t; using ::uint_fast8_t; using ::int_fast16_t; using ::uint_fast16_t;
using ::int_fast32_t; using ::uint_fast32_t; using ::int_fast64_t; using ::uint_fast64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
}
"#;

const LIMITS_H: &str = r#"#pragma once
#ifndef INT_MAX
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32767 - 1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
"#;

const FLOAT_H: &str = r#"#pragma once
#ifndef FLT_MAX
#define FLT_RADIX 2
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_DECIMAL_DIG 9
#define DBL_DECIMAL_DIG 17
#define FLT_MIN_EXP (-125)
#define DBL_MIN_EXP (-1021)
#define FLT_MAX_EXP 128
#define DBL_MAX_EXP 1024
#define FLT_MIN_10_EXP (-37)
#define DBL_MIN_10_EXP (-307)
#define FLT_MAX_10_EXP 38
#define DBL_MAX_10_EXP 308
#define FLT_MAX 3.40282346638528859812e+38F
#define DBL_MAX 1.79769313486231570815e+308
#define FLT_MIN 1.17549435082228750797e-38F
#define DBL_MIN 2.22507385850720138309e-308
#define FLT_EPSILON 1.1920928955078125e-07F
#define DBL_EPSILON 2.22044604925031308085e-16
#define FLT_TRUE_MIN 1.40129846432481707092e-45F
#define DBL_TRUE_MIN 4.94065645841246544177e-324
#endif
"#;

/// NVRTC has no `__builtin_huge_valf` or `__builtin_nanf`; `__builtin_bit_cast` is a constant
/// expression, so `constexpr float x = -INFINITY;` compiles as it does under nvcc.
const MATH_H: &str = r#"#pragma once
#ifndef INFINITY
#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#define HUGE_VALF __builtin_bit_cast(float, 0x7f800000u)
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
"#;

const CMATH: &str = r#"#pragma once
#include <math.h>
namespace std {
using ::abs; using ::fabs; using ::fmod; using ::remainder; using ::fma;
using ::fmax; using ::fmin; using ::fdim;
using ::exp; using ::exp2; using ::expm1; using ::log; using ::log10; using ::log2;
using ::log1p; using ::pow; using ::sqrt; using ::cbrt; using ::hypot;
using ::sin; using ::cos; using ::tan; using ::asin; using ::acos; using ::atan; using ::atan2;
using ::sinh; using ::cosh; using ::tanh; using ::asinh; using ::acosh; using ::atanh;
using ::erf; using ::erfc; using ::tgamma; using ::lgamma;
using ::ceil; using ::floor; using ::trunc; using ::round; using ::lround; using ::llround;
using ::nearbyint; using ::rint; using ::lrint; using ::llrint;
using ::frexp; using ::ldexp; using ::modf; using ::scalbn; using ::scalbln; using ::ilogb;
using ::logb; using ::nextafter; using ::copysign;
using ::isnan; using ::isinf; using ::isfinite; using ::signbit;
}
"#;

const CSTDIO: &str = "#pragma once\nnamespace std { using ::printf; }\n";
const CSTDLIB: &str =
    "#pragma once\nnamespace std { using ::malloc; using ::free; using ::abs; using ::labs; using ::llabs; }\n";
const CSTRING: &str = "#pragma once\nnamespace std { using ::memcpy; using ::memset; }\n";
const CSTDDEF: &str = "#pragma once\n#include <stddef.h>\nnamespace std { using ::size_t; using ::ptrdiff_t; typedef decltype(nullptr) nullptr_t; }\n";
const STDDEF_H: &str = "#pragma once\n#ifndef offsetof\n#define offsetof(t, m) ((size_t)&reinterpret_cast<const volatile char&>((((t*)0)->m)))\n#endif\n";
/// What NVRTC declares by itself (printf, assert, malloc, memcpy, size_t): a header to
/// include and nothing more.
const DECLARED: &str = "#pragma once\n";

/// Every header klab supplies, by the name an `#include` gives.
pub const STD_HEADERS: &[(&str, &str)] = &[
    ("stdint.h", STDINT),
    ("cstdint", CSTDINT),
    ("limits.h", LIMITS_H),
    ("climits", LIMITS_H),
    ("float.h", FLOAT_H),
    ("cfloat", FLOAT_H),
    ("math.h", MATH_H),
    ("cmath", CMATH),
    ("stdio.h", DECLARED),
    ("cstdio", CSTDIO),
    ("stdlib.h", DECLARED),
    ("cstdlib", CSTDLIB),
    ("string.h", DECLARED),
    ("cstring", CSTRING),
    ("assert.h", DECLARED),
    ("cassert", DECLARED),
    ("stddef.h", STDDEF_H),
    ("cstddef", CSTDDEF),
    ("stdbool.h", DECLARED),
];

/// A fresh private folder holding every header of [`STD_HEADERS`], removed when dropped.
pub fn folder() -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("klab-std-headers-")
        .tempdir()?;
    for (name, text) in STD_HEADERS {
        std::fs::write(dir.path().join(name), text)?;
    }
    Ok(dir)
}

/// One digest over every header, for the compile cache's key.
pub fn digest() -> String {
    let mut all = String::new();
    for (name, text) in STD_HEADERS {
        all.push_str(name);
        all.push('\0');
        all.push_str(text);
        all.push('\0');
    }
    sha256_hex(all.as_bytes())
}

/// A line to add to NVRTC's log when it could not open a header, saying where such a header
/// comes from under NVRTC: the C++ library proper (not imitated: libcu++'s `<cuda/std/...>`
/// is its device twin), the toolkit's CCCL folder (found with the toolkit), or else the
/// project's own or host code's (a launcher, `main`, a Python binding), which NVRTC does not
/// compile. `None` when the log has no such error.
pub fn hint(log: &str) -> Option<String> {
    const LIBRARY: &[&str] = &[
        "type_traits",
        "limits",
        "utility",
        "algorithm",
        "array",
        "tuple",
        "functional",
        "iterator",
        "numeric",
        "atomic",
        "bit",
        "complex",
        "new",
        "initializer_list",
    ];
    const CCCL: &[&str] = &["cuda/", "cub/", "thrust/", "nv/"];
    let missing = log
        .lines()
        .filter_map(|l| l.split("cannot open source file \"").nth(1))
        .find_map(|rest| rest.split('"').next())?;
    Some(if LIBRARY.contains(&missing) {
        format!(
            "klab: NVRTC has no C++ standard library and klab does not imitate <{missing}>: in device code use <cuda/std/{missing}> (the toolkit's CCCL headers), or move what needs <{missing}> out of the kernel's file"
        )
    } else if CCCL.iter().any(|c| missing.starts_with(c)) {
        format!(
            "klab: <{missing}> is one of the CUDA toolkit's CCCL headers, passed to NVRTC as -I when klab finds a toolkit whose include folder has a cccl folder ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, or beside the libnvrtc it loaded); this machine's has none"
        )
    } else {
        format!(
            "klab: NVRTC looks for \"{missing}\" beside the file that includes it and in the manifest's include_dirs only: a header of the project goes in include_dirs; one that only host code needs (a launcher, main, a Python binding; NVRTC compiles device code only) goes, with that code, under #ifndef __CUDACC_RTC__ ... #endif"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_holds_every_header_as_written() {
        let d = folder().unwrap();
        for (name, text) in STD_HEADERS {
            assert_eq!(std::fs::read_to_string(d.path().join(name)).unwrap(), *text);
        }
        assert_eq!(digest(), digest());
    }

    #[test]
    fn a_missing_header_gets_a_line_saying_where_such_a_header_comes_from() {
        let log =
            |h: &str| format!("k.cu(1): catastrophic error: cannot open source file \"{h}\"\n");
        let h = hint(&log("type_traits")).unwrap();
        assert!(h.contains("<cuda/std/type_traits>"), "{h}");
        for h in ["cub/cub.cuh", "cuda/std/cstdint", "nv/target"] {
            let line = hint(&log(h)).unwrap();
            assert!(
                line.contains("CCCL") && !line.contains("cuda/std/cub"),
                "{line}"
            );
        }
        for h in ["torch/extension.h", "iostream", "tile.cuh"] {
            let line = hint(&log(h)).unwrap();
            assert!(
                line.contains("__CUDACC_RTC__") && line.contains("include_dirs"),
                "{line}"
            );
        }
        assert_eq!(hint("k.cu(3): error: identifier \"x\" is undefined"), None);
        assert!(!hint(&log("x.h")).unwrap().contains('\n'));
    }
}
