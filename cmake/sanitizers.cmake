# Sanitizers instrument aoi's own code (every aoi target links aoi_own_code). Under AddressSanitizer
# llama.cpp is built exactly as in the release build, so the compiler cache shares its objects: instrumenting
# it would cost a full rebuild to check code this project does not own. ThreadSanitizer is different: it
# intercepts ggml's memcpy calls whether or not ggml is instrumented, so it must also see what orders them,
# and cmake/llama.cmake instruments llama.cpp (with ggml's own thread pool instead of OpenMP's uninstrumented
# runtime).
if(AOI_SANITIZE_ADDRESS AND AOI_SANITIZE_THREAD)
  message(FATAL_ERROR "AOI_SANITIZE_ADDRESS and AOI_SANITIZE_THREAD are exclusive")
endif()
if(AOI_FUZZ AND (AOI_SANITIZE_ADDRESS OR AOI_SANITIZE_THREAD))
  message(FATAL_ERROR "AOI_FUZZ brings its own sanitizers: build it without AOI_SANITIZE_ADDRESS/THREAD")
endif()
# -O1 -g1 after the build type's -O3, as the sanitizers' documentation advises: stacks with functions, files
# and lines, and a build about half as long as with -O2 -g (measured on the server's files: 28 s against 51 s
# a file), which is most of CI's time; the tests' time is mostly in llama.cpp's code, which keeps its -O3. Two of
# GCC 12's flow-based warnings misfire on instrumented code: -Wmismatched-new-delete on Asio's coroutine
# frames (ASan checks every allocation's deallocation at run time instead) and -Wmaybe-uninitialized in
# Beast's parser; the release build keeps both, as errors.
set(aoi_sanitizer_common -fno-omit-frame-pointer -O1 -g1 -Wno-mismatched-new-delete -Wno-maybe-uninitialized)
if(AOI_SANITIZE_ADDRESS)
  target_compile_options(aoi_own_code INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=undefined
                                                ${aoi_sanitizer_common})
  target_link_options(aoi_own_code INTERFACE -fsanitize=address,undefined)
endif()
if(AOI_SANITIZE_THREAD)
  # GCC cannot instrument std::atomic_thread_fence (Asio's handler queues use it) and says so (-Wtsan); a race
  # that only a fence orders would be reported, failing a test, never hidden.
  target_compile_options(aoi_own_code INTERFACE -fsanitize=thread ${aoi_sanitizer_common} -Wno-tsan)
  target_link_options(aoi_own_code INTERFACE -fsanitize=thread)
endif()
if(AOI_FUZZ)
  # libFuzzer's coverage instrumentation on aoi's code only (llama.cpp is not what is fuzzed); each fuzz target
  # links the fuzzer's main itself (-fsanitize=fuzzer, tests/fuzz). Clang knows neither of GCC's warnings above.
  # Clang 14's -fsanitize=function (part of "undefined") cannot place its prologue data in the split parts of a
  # coroutine ("error: Cannot represent a difference across sections" on the server's files): left out.
  target_compile_options(aoi_own_code INTERFACE -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function
                                                -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O2 -g1)
  target_link_options(aoi_own_code INTERFACE -fsanitize=address,undefined)
endif()
