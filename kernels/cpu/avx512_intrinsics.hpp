// <immintrin.h> for the AVX-512 kernel files. GCC 12 warns that the _mm512_undefined_* operands
// its own intrinsics pass on (vcvtdq2ps, vcvtph2ps, vpmovzxbd) may be uninitialized: a false
// positive of the header, so its warnings are silenced for the header's lines only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
