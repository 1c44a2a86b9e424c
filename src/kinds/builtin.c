/* builtin.c - registers every stage's kinds with core's registry (core/kind.h):
 * the one place that lists the stages, above them all, so that core never
 * names a module. */
#include <pthread.h>
#include <stdio.h>

#include "kinds/builtin.h"

#include "admission/kinds.h"
#include "client/scenario.h"
#include "core/kind.h"
#include "cost/chargeback.h"
#include "gateway/gateway.h"
#include "queue/kinds.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static td_status once_status;
static td_err once_err;

static void register_all(void)
{
    /* the order of registration is the order "unknown kind" lists them */
    const td_kind_def *(*const stages[])(size_t *) = {
        td_admission_kinds, td_queue_kinds, td_gateway_kinds, td_cost_kinds, td_client_kinds};
    once_status = TD_OK;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0] && once_status == TD_OK; i++) {
        size_t n = 0;
        const td_kind_def *defs = stages[i](&n);
        once_status = td_kind_register(defs, n, &once_err);
    }
}

td_status td_kinds_register_builtin(td_err *err)
{
    pthread_once(&once, register_all);
    if (once_status != TD_OK && err)
        snprintf(err->msg, sizeof err->msg, "%s", once_err.msg);
    return once_status;
}
