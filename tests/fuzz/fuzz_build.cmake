# The fuzz build (SELFSPEC_FUZZ=ON; scripts/build-fuzz.sh makes it): clang with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, building only what the parsers need (core/,
# GGUF's dequantization from kernels/cpu, src/model_io, src/tokenizer) and the fuzz targets of
# tests/fuzz. The top-level CMakeLists.txt
# includes this file and stops after it: no CUDA, MPI, backends, test suite or benchmarks.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "SELFSPEC_FUZZ=ON needs clang (libFuzzer); configure with "
                      "-DCMAKE_CXX_COMPILER=clang++, as scripts/build-fuzz.sh does")
endif()

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# Every object is instrumented: coverage for libFuzzer (the fuzz executables add its driver),
# ASan, UBSan stopping at its first report, and libstdc++'s bounds assertions.
set(SELFSPEC_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all)
add_library(selfspec_options INTERFACE)
target_include_directories(selfspec_options INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
target_compile_options(selfspec_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor $<$<BOOL:${SELFSPEC_WERROR}>:-Werror>
  -fsanitize=fuzzer-no-link ${SELFSPEC_SANITIZERS} -fno-omit-frame-pointer)
target_link_options(selfspec_options INTERFACE ${SELFSPEC_SANITIZERS})
target_compile_definitions(selfspec_options INTERFACE
  SELFSPEC_HAVE_CUDA=0
  SELFSPEC_VERSION="${PROJECT_VERSION}"
  _GLIBCXX_ASSERTIONS)

add_subdirectory(core)
# Of kernels/cpu, model_io needs only GGUF's dequantization (its compile options as in
# kernels/cpu/CMakeLists.txt); the rest (runtime AVX2 dispatch) is not built here.
add_library(selfspec_kernels_cpu STATIC kernels/cpu/ggml_dequantize.cpp)
target_link_libraries(selfspec_kernels_cpu PUBLIC selfspec_core)
set_source_files_properties(kernels/cpu/ggml_dequantize.cpp PROPERTIES COMPILE_OPTIONS
                                                                      -ffp-contract=off)
add_subdirectory(src/model_io)
add_subdirectory(src/tokenizer)
add_subdirectory(tests/fuzz)
