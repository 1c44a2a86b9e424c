/* builtin.h - every kind tenantd knows, registered with core's registry
 * (core/kind.h) in one call. The one module that names every stage: it
 * sits above them (and above the client library, which owns LoadScenario),
 * so that core never names a module. */
#ifndef TENANTD_KINDS_BUILTIN_H
#define TENANTD_KINDS_BUILTIN_H

#include "tenantd/status.h"

/* Registers every stage's kinds once per process (pthread_once); later
 * calls return the first call's status. TD_OK, or the registry's error
 * (a programming mistake: two stages claiming one name). Every program and
 * test that builds a config snapshot calls it first. */
td_status td_kinds_register_builtin(td_err *err);

#endif
