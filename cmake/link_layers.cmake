# link_layers.cmake - proof that the unit libraries call only down: for
# each td_<unit> library, every symbol it leaves undefined that another
# unit's library defines must be defined by one of the unit's deps in
# layers.cmake. Prints library, symbol and both units for each one that is
# not; fails if there is any. Run by ctest (layers/link) after the build:
#   cmake -DTD_SOURCE_DIR=.. -DTD_BINARY_DIR=. -DTD_NM=nm -P cmake/link_layers.cmake
# TD_DROP_DEP="io:gateway" takes one edge out of the table (the check's
# own test: io's calls into gateway must then be caught).
cmake_minimum_required(VERSION 3.18)
include(${TD_SOURCE_DIR}/cmake/layers.cmake)
if(TD_DROP_DEP MATCHES "^([^:]+):([^:]+)$")
  list(REMOVE_ITEM TD_UNIT_DEPS_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endif()

# Sets <var> to the symbols nm prints for lib with the given options.
function(symbols var lib)
  execute_process(COMMAND ${TD_NM} ${ARGN} ${lib} OUTPUT_VARIABLE out RESULT_VARIABLE rc
                  ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "layers: ${TD_NM} ${lib} failed (${rc})")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${out}")
  set(syms "")
  foreach(l ${lines})
    if(l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([A-Za-z_][A-Za-z0-9_.]*)$")
      list(APPEND syms ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES syms)
  set(${var} "${syms}" PARENT_SCOPE)
endfunction()

set(libs "")
foreach(unit ${TD_UNITS})
  set(lib ${TD_BINARY_DIR}/libtd_${unit}.a)
  if(EXISTS ${lib})
    list(APPEND libs ${unit})
    symbols(def_${unit} ${lib} -g --defined-only)
    foreach(s ${def_${unit}})
      set(owner_${s} ${unit})
    endforeach()
  endif()
endforeach()
if(NOT libs)
  message(FATAL_ERROR "layers: no libtd_*.a in ${TD_BINARY_DIR} (build first)")
endif()

set(bad 0)
set(n 0)
foreach(unit ${libs})
  symbols(und ${TD_BINARY_DIR}/libtd_${unit}.a -u)
  foreach(s ${und})
    set(owner "${owner_${s}}")
    if(owner STREQUAL "" OR owner STREQUAL unit)
      continue()
    endif()
    math(EXPR n "${n} + 1")
    if(NOT owner IN_LIST TD_UNIT_DEPS_${unit})
      message("libtd_${unit}.a calls ${s} of ${owner}: a call up or sideways")
      math(EXPR bad "${bad} + 1")
    endif()
  endforeach()
endforeach()
if(bad GREATER 0)
  message(FATAL_ERROR "layers: ${bad} call(s) across units that layers.cmake does not allow")
endif()
list(LENGTH libs nl)
message("layers: ${n} calls between the ${nl} unit libraries all point down")
