/* ledger_rec.h - one usage ledger record: a gateway request or an admitted
 * interval of a batch workload, attributed to its owner. The type only: the
 * stages that make or price records (queue, cost) use it without the
 * ledger's storage, which is io's (io/ledger.h). */
#ifndef TENANTD_LEDGER_REC_H
#define TENANTD_LEDGER_REC_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    TD_LEDGER_REQUEST = 0, /* one gateway request */
    TD_LEDGER_INTERVAL = 1 /* a workload held resources of one flavor for a while */
} td_ledger_kind;

#define TD_LEDGER_STR 64
#define TD_LEDGER_MODEL 128 /* model names are longer than labels ("org/Model-70B-Instruct") */

typedef struct {
    td_ledger_kind kind;
    char id[96];                        /* idempotency key, unique per record */
    int64_t start_ns, end_ns;           /* request: arrival, completion; interval: admitted, ended */
    char tenant[TD_LEDGER_STR];         /* Tenant name ("" if none) */
    char team[TD_LEDGER_STR];           /* cost labels */
    char project[TD_LEDGER_STR];
    char environment[TD_LEDGER_STR];
    char route[TD_LEDGER_STR];          /* request: Route name */
    char api_key[TD_LEDGER_STR];        /* request: the API key's name ("" for an unnamed key) */
    char model[TD_LEDGER_MODEL];        /* request: the body's "model" ("" if none, or an older ledger) */
    char workload[2 * TD_LEDGER_STR];   /* interval: "namespace/name" */
    char cluster_queue[TD_LEDGER_STR];  /* interval */
    char flavor[TD_LEDGER_STR];         /* interval: ResourceFlavor of these resources */
    char outcome[16];                   /* request: ok|rejected|shed|error|timeout;
                                           interval: finished|evicted|running */
    bool interruptible;                 /* interval: ran at a preemptible priority */
    int64_t count;                      /* records summed (1 for a raw record) */
    int64_t tokens_in, tokens_out;      /* request */
    int64_t gpu_milli_seconds;          /* request: GPU-seconds used x 1000 (reported or estimated) */
    int64_t gpu_milli, cpu_milli;       /* interval: GPUs and CPUs held, in milli-units */
    int64_t memory_bytes;               /* interval */
    int64_t storage_bytes;              /* interval: persistent storage requested */
    int64_t gpu_used_milli;             /* interval: GPUs really busy on average, -1 unknown */
} td_ledger_rec;

/* Called once per record by a walk over records (the ledger reader, a queue's
 * intervals); r is borrowed for the call. Returns non-zero to stop. */
typedef int (*td_ledger_cb)(const td_ledger_rec *r, void *ud);

#endif
