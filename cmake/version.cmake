# What `aoi --version` prints, fixed at configure time into generated/aoi/version.h (target aoi_version):
# aoi's version, the llama.cpp tree it is built with (llama.cpp's own version, build number and commit, as its
# tools print them) and the pin in cmake/llama.cpp.lock, and the compiler.
# llama.cpp computes its build number and commit from its git checkout when it is configured; the pinned
# tree comes from a squashed bundle (scripts/fetch-llama.sh), so its build number is 1 and the commit is
# what identifies it.
get_directory_property(aoi_llama_version DIRECTORY "${AOI_LLAMA_DIR}" DEFINITION LLAMA_VERSION)
get_directory_property(aoi_llama_build_number DIRECTORY "${AOI_LLAMA_DIR}" DEFINITION LLAMA_BUILD_NUMBER)
get_directory_property(aoi_llama_build_commit DIRECTORY "${AOI_LLAMA_DIR}" DEFINITION LLAMA_BUILD_COMMIT)
foreach(var aoi_llama_version aoi_llama_build_number aoi_llama_build_commit)
  if("${${var}}" STREQUAL "")
    set(${var} "unknown")
  endif()
endforeach()

set(aoi_llama_lock "${PROJECT_SOURCE_DIR}/cmake/llama.cpp.lock")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${aoi_llama_lock}")
file(STRINGS "${aoi_llama_lock}" aoi_lock_lines REGEX "^LLAMA_[A-Z0-9_]+=")
foreach(line ${aoi_lock_lines})
  string(REGEX MATCH "^(LLAMA_[A-Z0-9_]+)=(.*)$" _ "${line}")
  set(aoi_lock_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
endforeach()
set(aoi_llama_pin "${aoi_lock_LLAMA_COMMIT}, from ${aoi_lock_LLAMA_NPM_PACKAGE} ${aoi_lock_LLAMA_NPM_VERSION}")
string(FIND "${aoi_lock_LLAMA_COMMIT}" "${aoi_llama_build_commit}" aoi_pin_at)
if(aoi_pin_at EQUAL 0)
  set(aoi_llama_pinned "the pinned ${aoi_llama_pin}")
else()
  set(aoi_llama_pinned "not the pinned ${aoi_llama_pin}: ${AOI_LLAMA_DIR}")
endif()

set(AOI_VERSION_TEXT "aoi ${PROJECT_VERSION}")
# aoi's own commit, for /metrics' aoi_build_info: known when the source is a git checkout at configure time.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                OUTPUT_VARIABLE AOI_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE aoi_git_rc)
if(NOT aoi_git_rc EQUAL 0 OR "${AOI_GIT_COMMIT}" STREQUAL "")
  set(AOI_GIT_COMMIT "unknown")
endif()
set(AOI_VERSION_NUMBER "${PROJECT_VERSION}")
set(AOI_LLAMA_BUILD_NUMBER "${aoi_llama_build_number}")
set(AOI_LLAMA_COMMIT "${aoi_llama_build_commit}")
set(AOI_LLAMA_TEXT "llama.cpp ${aoi_llama_version}, build ${aoi_llama_build_number}, commit ${aoi_llama_build_commit} (${aoi_llama_pinned})")
set(AOI_COMPILER_TEXT "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, ${CMAKE_BUILD_TYPE}, ${CMAKE_SYSTEM_NAME} ${CMAKE_SYSTEM_PROCESSOR}")
# C string literals: a path may hold a backslash or a quote.
foreach(var AOI_VERSION_TEXT AOI_LLAMA_TEXT AOI_COMPILER_TEXT AOI_LLAMA_COMMIT)
  string(REPLACE "\\" "\\\\" ${var} "${${var}}")
  string(REPLACE "\"" "\\\"" ${var} "${${var}}")
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/cmake/version.h.in" "${CMAKE_BINARY_DIR}/generated/aoi/version.h" @ONLY)
add_library(aoi_version INTERFACE)
target_include_directories(aoi_version INTERFACE "${CMAKE_BINARY_DIR}/generated")
