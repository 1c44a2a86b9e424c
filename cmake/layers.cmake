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

# Upward includes that are known and have a named step that removes them:
# "file|included header|what removes it". The include root of the file's
# unit gets that one header, so the build stays green (the check holds it
# to that one file); the check fails once an exception is no longer used,
# so that it is deleted when its step lands.
set(TD_LAYER_EXCEPTIONS
)
