# check_layers.cmake - every #include "..." under src/ against the layer
# table of layers.cmake: a file may include its own unit's headers and the
# public headers of the units its unit depends on, never another unit's
# *_internal.h. Prints file:line and both units for each include that
# breaks the rule and is not a listed exception, and each exception that no
# longer matches an include (delete it); fails if there is either.
#   cmake -DTD_SOURCE_DIR=. -P cmake/check_layers.cmake       (make layers)
# TD_PLANT="src/core/x.c:1:#include \"gateway/budget.h\"" adds one line to
# check as if it were in the tree (the check's own test).
cmake_minimum_required(VERSION 3.18)
if(NOT TD_SOURCE_DIR)
  get_filename_component(TD_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
endif()
include(${TD_SOURCE_DIR}/cmake/layers.cmake)

execute_process(
  COMMAND grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"" src
          --include=*.c --include=*.h
  WORKING_DIRECTORY ${TD_SOURCE_DIR}
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "layers: grep over ${TD_SOURCE_DIR}/src failed (${rc})")
endif()
if(TD_PLANT)
  string(APPEND out "${TD_PLANT}\n")
endif()
# Neither ';' nor '[' ']' may reach list operations.
string(REGEX REPLACE "[][;]" "_" out "${out}")
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")

set(used "")
set(bad 0)
set(n 0)
foreach(l ${lines})
  if(NOT l MATCHES "^(src/([^/:]+)/[^:]*):([0-9]+):[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
    continue() # a file directly in src/ belongs to no unit
  endif()
  set(file ${CMAKE_MATCH_1})
  set(unit ${CMAKE_MATCH_2})
  set(line ${CMAKE_MATCH_3})
  set(h ${CMAKE_MATCH_4})
  math(EXPR n "${n} + 1")
  if(NOT unit IN_LIST TD_UNITS)
    message("${file}:${line}: src/${unit}/ is no unit of cmake/layers.cmake (add it to TD_UNITS)")
    math(EXPR bad "${bad} + 1")
    continue()
  endif()
  if(NOT h MATCHES "/")
    continue() # beside the including file: its own unit
  endif()
  if(h MATCHES "^tenantd/([^/]+)$")
    set(owner "${TD_PUBLIC_OWNER_${CMAKE_MATCH_1}}")
  else()
    string(REGEX MATCH "^[^/]+" owner "${h}")
  endif()
  if(owner STREQUAL unit)
    continue()
  endif()
  set(why "")
  if(NOT owner IN_LIST TD_UNITS)
    set(why "of no unit in cmake/layers.cmake")
  elseif(h MATCHES "_internal\\.h$")
    set(why "internal to ${owner}")
  elseif(NOT owner IN_LIST TD_UNIT_DEPS_${unit})
    set(deps "${TD_UNIT_DEPS_${unit}}")
    if(deps STREQUAL "")
      set(deps "no other unit")
    endif()
    string(REPLACE ";" ", " deps "${deps}")
    set(why "of ${owner}: an include up or sideways (${unit} may use ${deps})")
  endif()
  if(why STREQUAL "")
    continue()
  endif()
  set(exception OFF)
  foreach(e ${TD_LAYER_EXCEPTIONS})
    if(e MATCHES "^([^|]+)\\|([^|]+)\\|" AND CMAKE_MATCH_1 STREQUAL file
       AND CMAKE_MATCH_2 STREQUAL h)
      set(exception ON)
      list(APPEND used "${file}|${h}")
    endif()
  endforeach()
  if(NOT exception)
    message("${file}:${line}: ${unit} includes ${h}, ${why}")
    math(EXPR bad "${bad} + 1")
  endif()
endforeach()

set(nexc 0)
foreach(e ${TD_LAYER_EXCEPTIONS})
  string(REGEX MATCH "^[^|]+\\|[^|]+" key "${e}")
  if(NOT key IN_LIST used)
    message("cmake/layers.cmake: exception ${key} matches no include any more: delete it")
    math(EXPR bad "${bad} + 1")
  else()
    math(EXPR nexc "${nexc} + 1")
  endif()
endforeach()
if(bad GREATER 0)
  message(FATAL_ERROR "layers: ${bad} problem(s) in ${n} include lines")
endif()
message("layers: ${n} include lines under src/ follow cmake/layers.cmake "
        "(${nexc} named exceptions in use)")
