/* control.h - the admin listener's requests: the admission webhook
 * (/validate, /mutate), health (/healthz, /readyz) and the control API
 * (/v1/apply, /v1/objects), the dashboard (/ui, /v1/usage, /v1/dashboard). State is one atomic snapshot pointer and the
 * store; an apply builds and validates a whole new snapshot, commits it to
 * the store, then swaps the pointer. */
#ifndef TENANTD_DAEMON_CONTROL_H
#define TENANTD_DAEMON_CONTROL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "gateway/gateway.h"
#include "io/http_server.h"
#include "io/store.h"
#include "queue/queue.h"

struct td_metering;
struct td_leader;

typedef struct {
    /* owned reference; read it with td_control_snapshot: a reader on
     * another thread must take its reference before a commit can drop the
     * old snapshot's last one, hence snapshot_lock around ref and swap */
    _Atomic(td_config *) snapshot;
    pthread_mutex_t snapshot_lock;
    struct td_metering *metering;  /* borrowed; NULL: no /v1/usage data */
    td_store *store;               /* borrowed */
    td_gateway *gateway;           /* borrowed; NULL: no gateway */
    /* borrowed; NULL: no ledger. Budgets an apply adds count its spend. */
    struct td_ledger *ledger;
    const char *data_dir;
    /* borrowed; NULL: this replica always schedules, unfenced (SQLite).
     * Else commits run the pass only while it holds the lease (leader.h). */
    struct td_leader *leader;
    /* the leader's term (td_leader_term) the queue kept between commits
     * was last used under: a commit under another drops it first */
    int64_t queue_term;
    int ready;
    int has_admin_token;           /* the control API and /metrics need it */
    /* Admission decisions by rule: [rule][0 allowed, 1 denied, 2 shadow-denied];
     * rule 0 is "" (allowed), then TD_CONTROL_RULES. */
    _Atomic unsigned long long admission[12][3];
    unsigned char admin_token_sha256[32];
} td_control;

/* Requires `Authorization: Bearer TOKEN` on the control API (/v1/...) and
 * /metrics from now on. Only the token's SHA-256 is kept. */
void td_control_set_admin_token(td_control *c, const char *token, size_t len);

/* Takes over cfg. gateway may be NULL. */
void td_control_init(td_control *c, td_config *cfg, td_store *store, td_gateway *gateway);

/* Runs the batch queue's scheduling pass over next on the queue kept
 * between commits (td_workloads_commit: only what changed is decided and
 * written; an apply of the queue's objects or a delete rebuilds it), stores
 * objs (borrowed), the Workloads whose status the pass changed and
 * the deletions in one transaction (fenced by the leader's term when there
 * is a leader; a replica that is not the leader runs no pass and stores
 * objs alone, as does the leader whose fenced write was refused, and its
 * kept queue is dropped: the next pass rebuilds it from the records), then
 * makes next with those statuses
 * (taken over) the snapshot everyone sees and reloads the gateway from it.
 * On error (TD_EINVAL when the queue cannot take next's objects) nothing
 * changed and next is released. Loop thread only. */
td_status td_control_commit(td_control *c, td_config *next, json_t *const *objs, size_t nobjs,
                            const td_object_id *dels, size_t ndels, td_err *err);

/* The records a pass over the snapshot served decided (td_workloads_pass:
 * changed, borrowed; q, taken over, its queue afterwards) stored in one
 * transaction and served, q kept as the queue between commits: the pass
 * at start, stored without a second pass. Under a scheduling leader
 * (--database) the ordinary commit of nothing instead (its fenced pass).
 * On error nothing is stored and q is freed. Loop thread. */
td_status td_control_commit_pass(td_control *c, td_queue *q, json_t *changed, td_err *err);

/* Makes next (taken over), just loaded from the store after another
 * replica committed, the snapshot everyone sees and reloads the gateway
 * from it, as td_control_commit does, but stores nothing and runs no
 * scheduling pass (its queue view is rebuilt by its first reader, and the
 * queue kept between commits is dropped: the next pass rebuilds it from
 * the records the other replica wrote). Loop thread only. */
void td_control_adopt(td_control *c, td_config *next);
void td_control_fini(td_control *c);

/* A new reference to the snapshot being served; any thread. */
td_config *td_control_snapshot(td_control *c);

/* The td_http_handler of the admin listener; user is a td_control. The
 * admission reviews (/validate, /mutate, /admit) and /healthz, /readyz may
 * run on any thread, concurrently; everything else on the loop thread that
 * commits (the control API writes the store and swaps the snapshot). */
void td_control_handle(const td_http_request *req, td_http_response *resp, void *user);

/* td_http_multi_opts.handle_batch for td_control_handle: a turn's
 * requests; consecutive submits (POST /v1/workloads) are checked one by
 * one, then committed together (one store transaction, one scheduling
 * pass), each answered after that commit; a refused one fails alone.
 * Every other request as td_control_handle. Loop thread. */
void td_control_handle_batch(const td_http_request *const *reqs, td_http_response *resps,
                             size_t n, void *user);

/* Copies the value of query parameter key of query (a request's raw
 * query) into out, n bytes at most, percent-decoded; 0 if absent. */
int td_control_query_param(const char *query, const char *key, char *out, size_t n);

/* td_http_multi_opts.anywhere for td_control_handle: true for the requests
 * above that may run on any thread. */
bool td_control_anywhere(const td_http_request *req, void *user);

/* Largest YAML bodies of POST /v1/apply and POST /v1/workloads: kube-
 * apiserver's request limit. Their parse is bounded by it and by
 * td_manifest's alias budget (aliases are refused outright on
 * /v1/workloads, which a tenant's key reaches): at most about 6 million
 * values, measured 1.4 s and 143 MB for 3 MiB of "[1,1,...]". */
#define TD_CONTROL_APPLY_MAX_BODY  (3u << 20)
#define TD_CONTROL_SUBMIT_MAX_BODY (3u << 20)

/* td_http_multi_opts.wants_prepare, .prepare and .release for
 * td_control_handle: the YAML bodies of /v1/apply and /v1/workloads are
 * parsed on a prepare thread (any thread; reads only the snapshot), after
 * the request's credential is checked, so that no loop waits for a parse;
 * the handler on the loop thread then validates and commits. */
bool td_control_wants_prepare(const td_http_request *req, void *user);
void *td_control_prepare(const td_http_request *req, void *user);
void td_control_release(void *prepared, void *user);

#endif
