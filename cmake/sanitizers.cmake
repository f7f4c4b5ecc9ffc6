# Sanitizers apply to everything built in this tree, llama.cpp included: ThreadSanitizer only sees the
# synchronisation of code it instruments, and ggml's worker threads write the logits aoi reads.
if(AOI_SANITIZE_ADDRESS AND AOI_SANITIZE_THREAD)
  message(FATAL_ERROR "AOI_SANITIZE_ADDRESS and AOI_SANITIZE_THREAD are exclusive")
endif()
if(AOI_SANITIZE_ADDRESS)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(AOI_SANITIZE_THREAD)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # OpenMP's runtime is not instrumented; ggml's own thread pool is.
  set(GGML_OPENMP OFF)
endif()
