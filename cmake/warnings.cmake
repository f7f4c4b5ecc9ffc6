# Warning flags for aoi's own targets (llama.cpp keeps its own).
target_compile_options(aoi_own_code INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                              -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough
                                              # partial designated initialisers ({.n_ctx = 1024}) are idiomatic
                                              -Wno-missing-field-initializers
                                              # GCC 12 reports std::string appends falsely (GCC bug 105329)
                                              $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
if(AOI_WERROR)
  target_compile_options(aoi_own_code INTERFACE -Werror)
endif()
