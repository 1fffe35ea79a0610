// SELFSPEC_HOST_DEVICE: `__host__ __device__` under nvcc, nothing elsewhere, for the functions the
// CPU and CUDA kernels share (shared_math.hpp, cuda/quant_rows.hpp, cuda/attention_split.hpp).
#pragma once

#if defined(__CUDACC__)
#define SELFSPEC_HOST_DEVICE __host__ __device__
#else
#define SELFSPEC_HOST_DEVICE
#endif
