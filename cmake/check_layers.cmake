# check_layers.cmake - every #include "..." under src/ against the layer
# table of layers.cmake: a file may include its own unit's headers and the
# public headers of the units its unit depends on, never another unit's
# *_internal.h; and the table itself has no cycle (the libraries link along
# it). Prints file:line and both units for each include that breaks the
# rule, or the cycle; fails if there is either.
#   cmake -DTD_SOURCE_DIR=. -P cmake/check_layers.cmake       (make layers)
# TD_PLANT="src/core/x.c:1:#include \"gateway/budget.h\"" adds one line to
# check as if it were in the tree, TD_PLANT_DEP="core:gateway" one edge to
# the table (the check's own tests).
cmake_minimum_required(VERSION 3.18)
if(NOT TD_SOURCE_DIR)
  get_filename_component(TD_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
endif()
include(${TD_SOURCE_DIR}/cmake/layers.cmake)
if(TD_PLANT_DEP MATCHES "^([^:]+):([^:]+)$")
  list(APPEND TD_UNIT_DEPS_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endif()
td_layers_cycle(cycle)
if(cycle)
  message(FATAL_ERROR "cmake/layers.cmake: the layers make a cycle (${cycle}); "
                      "a unit's deps may only point down")
endif()

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
  message("${file}:${line}: ${unit} includes ${h}, ${why}")
  math(EXPR bad "${bad} + 1")
endforeach()

if(bad GREATER 0)
  message(FATAL_ERROR "layers: ${bad} problem(s) in ${n} include lines")
endif()
message("layers: ${n} include lines under src/ follow cmake/layers.cmake, "
        "which has no cycle")
