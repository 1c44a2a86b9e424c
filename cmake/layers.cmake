# layers.cmake - tenantd's layers: which directory of src/ (a unit) may
# include which. Read by CMakeLists.txt (the per-unit include roots), by
# check_layers.cmake (`make layers`, ctest layers/includes) and by
# probe_layers.cmake (ctest layers/compile).
#
#   core (no I/O, no domain)
#     <- stages: admission, gateway, queue, cost (pure decisions; gateway
#        prices requests with cost's policy, the one stage-to-stage edge)
#       <- io (sockets, TLS, SQLite, PostgreSQL, Redis, HTTP)
#         <- client (the client library; its LoadScenario reads gateway's
#            criticality classes)
#           <- kinds (registers every stage's kinds with core's registry)
#           <- daemon, cli (wiring: programs tenantd, tenantctl)
#   simmodel (program: the model-server simulator) uses core and io.
#
# A unit may include its own headers and the public headers of the units
# listed as its deps; another unit's *_internal.h never.

set(TD_UNITS core admission gateway queue cost io client kinds daemon cli simmodel)

set(TD_UNIT_DEPS_core "")
set(TD_UNIT_DEPS_admission core)
set(TD_UNIT_DEPS_gateway core cost)
set(TD_UNIT_DEPS_queue core)
set(TD_UNIT_DEPS_cost core)
set(TD_UNIT_DEPS_io core admission gateway queue cost)
set(TD_UNIT_DEPS_client core gateway io)
set(TD_UNIT_DEPS_kinds core admission gateway queue cost client)
set(TD_UNIT_DEPS_daemon core admission gateway queue cost io client kinds)
set(TD_UNIT_DEPS_cli core admission gateway queue cost io client kinds)
set(TD_UNIT_DEPS_simmodel core io)

# include/tenantd/ (what an outside program links) and the unit that owns
# each header there.
set(TD_PUBLIC_OWNER_status.h core)
set(TD_PUBLIC_OWNER_http.h io)
set(TD_PUBLIC_OWNER_client.h client)

# The libraries link along this table too: td_<unit> links td_<dep> for
# each of its deps, a program links its unit's deps, and nothing is
# linked as a group the linker rescans. An upward call therefore has
# nothing to resolve it, and a cycle in the table stops the configure
# step (td_layers_cycle below; `make layers` checks it too).

# Sets out (in the caller's scope) to "" when the table has no cycle, else
# to one cycle as "a -> b -> a". A unit's deps must name units.
function(td_layers_cycle out)
  foreach(start ${TD_UNITS})
    # breadth-first from start's deps, remembering how each unit was reached
    set(queue ${TD_UNIT_DEPS_${start}})
    set(seen ${queue})
    foreach(d ${queue})
      set(via_${d} ${start})
    endforeach()
    while(queue)
      list(POP_FRONT queue u)
      if(u STREQUAL start)
        set(path ${start})
        set(x ${via_${start}})
        while(NOT x STREQUAL start)
          list(PREPEND path ${x})
          set(x ${via_${x}})
        endwhile()
        list(PREPEND path ${start})
        string(REPLACE ";" " -> " path "${path}")
        set(${out} "${path}" PARENT_SCOPE)
        return()
      endif()
      foreach(d ${TD_UNIT_DEPS_${u}})
        if(NOT d IN_LIST seen)
          list(APPEND seen ${d})
          list(APPEND queue ${d})
          set(via_${d} ${u})
        endif()
      endforeach()
    endwhile()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# Sets out to the units of deps (a list) that no other unit of deps already
# uses: what a target links so that the rest comes through them, e.g. for
# daemon's deps only kinds. The table must have no cycle.
function(td_layers_top out)
  set(top "")
  foreach(d ${ARGN})
    set(covered OFF)
    foreach(e ${ARGN})
      if(NOT e STREQUAL d AND d IN_LIST TD_UNIT_DEPS_${e})
        set(covered ON)
      endif()
    endforeach()
    if(NOT covered)
      list(APPEND top ${d})
    endif()
  endforeach()
  set(${out} "${top}" PARENT_SCOPE)
endfunction()
