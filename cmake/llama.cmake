# llama.cpp as a CMake subproject. Nothing from it is built unless an aoi target needs it
# (EXCLUDE_FROM_ALL): the library always, the llama2.c converter for tests, llama-server and llama-bench
# for benchmarks.
#
# Where the source comes from, first match wins:
#   -DAOI_LLAMA_DIR=/path/to/llama.cpp      an existing checkout
#   environment AOI_LLAMA_DIR               the same, for scripts
#   deps/llama.cpp                          the pinned tree that scripts/fetch-llama.sh clones
set(AOI_LLAMA_DIR "" CACHE PATH "An existing llama.cpp checkout (default: the pinned one in deps/llama.cpp)")
if(NOT AOI_LLAMA_DIR)
  if(DEFINED ENV{AOI_LLAMA_DIR} AND NOT "$ENV{AOI_LLAMA_DIR}" STREQUAL "")
    set(AOI_LLAMA_DIR "$ENV{AOI_LLAMA_DIR}")
  else()
    set(AOI_LLAMA_DIR "${PROJECT_SOURCE_DIR}/deps/llama.cpp")
  endif()
endif()
if(NOT EXISTS "${AOI_LLAMA_DIR}/include/llama.h")
  message(FATAL_ERROR "llama.cpp not found at ${AOI_LLAMA_DIR}: run scripts/setup.sh, "
                      "or pass -DAOI_LLAMA_DIR=<checkout>")
endif()
message(STATUS "aoi: llama.cpp from ${AOI_LLAMA_DIR}")

set(BUILD_SHARED_LIBS OFF)
set(LLAMA_BUILD_COMMON ON)      # the converter and llama-server need it
set(LLAMA_BUILD_EXAMPLES ON)    # llama-convert-llama2c-to-ggml
set(LLAMA_BUILD_TOOLS ON)       # llama-server, llama-bench (benchmark baselines)
set(LLAMA_BUILD_SERVER ON)
set(LLAMA_BUILD_TESTS OFF)
set(LLAMA_BUILD_APP OFF)
set(LLAMA_OPENSSL OFF)
set(LLAMA_BUILD_UI OFF)
set(LLAMA_USE_PREBUILT_UI OFF)  # no network at build time
# The backends: an AOI_ option turns llama.cpp's on; one left off keeps whatever -DGGML_... said, so that
# llama.cpp's own options (GGML_METAL is on by default on Apple) hold as its documentation gives them.
foreach(backend CUDA VULKAN HIP RPC)
  if(AOI_${backend})
    set(GGML_${backend} ON)
  endif()
endforeach()

# CPU instruction sets: the host's, detected here, without AMX. -march=native (GGML_NATIVE) would include
# AMX where the CPU advertises it, and on virtual machines that advertise AMX without supporting it ggml's
# AMX kernels die with SIGILL. AOI_LLAMA_NATIVE=ON restores -march=native.
option(AOI_LLAMA_NATIVE "Build ggml with -march=native (AMX included)" OFF)
if(AOI_LLAMA_NATIVE)
  set(GGML_NATIVE ON)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND EXISTS /proc/cpuinfo)
  set(GGML_NATIVE OFF)
  file(STRINGS /proc/cpuinfo aoi_cpu_flags REGEX "^flags" LIMIT_COUNT 1)
  string(REGEX REPLACE "^flags[ \t]*:[ \t]*" "" aoi_cpu_flags "${aoi_cpu_flags}")
  separate_arguments(aoi_cpu_flags UNIX_COMMAND "${aoi_cpu_flags}")
  foreach(pair sse4_2:GGML_SSE42 avx:GGML_AVX avx2:GGML_AVX2 bmi2:GGML_BMI2 fma:GGML_FMA f16c:GGML_F16C
               avx_vnni:GGML_AVX_VNNI avx512f:GGML_AVX512 avx512vbmi:GGML_AVX512_VBMI
               avx512_vnni:GGML_AVX512_VNNI avx512_bf16:GGML_AVX512_BF16)
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 cpu_flag)
    list(GET pair 1 ggml_option)
    if(cpu_flag IN_LIST aoi_cpu_flags)
      set(${ggml_option} ON)
    else()
      set(${ggml_option} OFF)
    endif()
    list(APPEND aoi_ggml_isa "${ggml_option}=${${ggml_option}}")
  endforeach()
  message(STATUS "aoi: ggml CPU instruction sets: ${aoi_ggml_isa}")
endif()

if(AOI_SANITIZE_THREAD)
  # See cmake/sanitizers.cmake: ThreadSanitizer must see ggml's threads synchronise.
  set(GGML_OPENMP OFF)
  add_compile_options(-fsanitize=thread)
  add_link_options(-fsanitize=thread)
endif()

if(AOI_FUZZ)
  # The fuzz targets only tokenize; Clang's OpenMP runtime is one package fewer to install.
  set(GGML_OPENMP OFF)
endif()

add_subdirectory("${AOI_LLAMA_DIR}" "${CMAKE_BINARY_DIR}/llama.cpp" EXCLUDE_FROM_ALL SYSTEM)
