/* control.h - the admin listener's requests: the admission webhook
 * (/validate, /mutate), health (/healthz, /readyz) and the control API
 * (/v1/apply, /v1/objects). State is one atomic snapshot pointer and the
 * store; an apply builds and validates a whole new snapshot, commits it to
 * the store, then swaps the pointer. */
#ifndef TENANTD_DAEMON_CONTROL_H
#define TENANTD_DAEMON_CONTROL_H

#include <stdatomic.h>

#include "tenantd/config.h"
#include "tenantd/http.h"
#include "tenantd/store.h"

typedef struct {
    _Atomic(td_config *) snapshot; /* owned reference */
    td_store *store;               /* borrowed */
    int ready;
} td_control;

/* Takes over cfg. */
void td_control_init(td_control *c, td_config *cfg, td_store *store);
void td_control_fini(td_control *c);

/* The td_http_handler of the admin listener; user is a td_control. */
void td_control_handle(const td_http_request *req, td_http_response *resp, void *user);

#endif
