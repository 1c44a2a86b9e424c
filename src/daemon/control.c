/* control.c - routing and handlers of the admin listener. */
#include "daemon/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <time.h>

#include "daemon/workloads.h"
#include "tenantd/admit.h"
#include "tenantd/manifest.h"

void td_control_init(td_control *c, td_config *cfg, td_store *store, td_gateway *gateway)
{
    atomic_init(&c->snapshot, cfg);
    c->store = store;
    c->gateway = gateway;
    c->ready = 1;
    c->has_admin_token = 0;
    memset(c->admin_token_sha256, 0, sizeof c->admin_token_sha256);
}

td_status td_control_commit(td_control *c, td_config *next, json_t *const *objs, size_t nobjs,
                            const td_object_id *dels, size_t ndels, td_err *err)
{
    td_status st = td_store_write(c->store, objs, nobjs, dels, ndels, err);
    if (st != TD_OK) {
        td_config_unref(next);
        return st;
    }
    td_config_unref(atomic_exchange(&c->snapshot, next));
    /* Config validation already accepted every Tenant and Route, so a reload
     * fails only for lack of memory or slots; the store is the truth then,
     * and the next reload catches the gateway up. */
    if (c->gateway && td_gateway_reload(c->gateway, next, err) != TD_OK)
        fprintf(stderr, "tenantd: gateway reload failed: %s\n", err->msg);
    return TD_OK;
}

void td_control_set_admin_token(td_control *c, const char *token, size_t len)
{
    SHA256((const unsigned char *)token, len, c->admin_token_sha256);
    c->has_admin_token = 1;
}

/* Compares hashes, in constant time, so neither the token's length nor its
 * bytes leak through timing. */
static int authorized(const td_control *c, const td_http_request *req)
{
    if (!c->has_admin_token)
        return 1;
    const char *h = td_http_header(req, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0)
        return 0;
    unsigned char sha[32];
    SHA256((const unsigned char *)h + 7, strlen(h + 7), sha);
    return CRYPTO_memcmp(sha, c->admin_token_sha256, 32) == 0;
}

void td_control_fini(td_control *c)
{
    td_config_unref(atomic_exchange(&c->snapshot, NULL));
}

static void reply_text(td_http_response *resp, int status, const char *text)
{
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = strdup(text);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

/* Takes over j. The control API answers people (indented); the webhook
 * answers kube-apiserver, thousands of times a second (compact). */
static void reply_json_flags(td_http_response *resp, int status, json_t *j, size_t flags)
{
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = j ? json_dumps(j, flags | JSON_PRESERVE_ORDER) : NULL;
    if (!resp->body) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    resp->body_len = strlen(resp->body);
    json_decref(j);
}

static void reply_json(td_http_response *resp, int status, json_t *j)
{
    reply_json_flags(resp, status, j, JSON_INDENT(2));
}

static void reply_error(td_http_response *resp, int status, const char *msg)
{
    reply_json(resp, status, json_pack("{s:s}", "error", msg));
}

static void handle_review(td_control *c, const td_http_request *req, td_http_response *resp,
                          td_review_mode mode)
{
    json_error_t je;
    json_t *in = json_loadb(req->body, req->body_len, 0, &je);
    json_t *out = NULL;
    int code = 0;
    td_config *cfg = td_config_ref(atomic_load(&c->snapshot));
    if (!in) {
        char msg[300];
        snprintf(msg, sizeof msg, "request body is not JSON: line %d: %s", je.line, je.text);
        out = json_pack("{s:s, s:s, s:{s:s, s:b, s:{s:i, s:s, s:s}}}", "apiVersion",
                        "admission.k8s.io/v1", "kind", "AdmissionReview", "response", "uid", "",
                        "allowed", 0, "status", "code", 400, "message", msg, "reason",
                        "BadRequest");
    } else if (td_admission_review(cfg, in, mode, NULL, &out, &code) != TD_OK) {
        out = NULL;
    }
    td_config_unref(cfg);
    json_decref(in);
    if (!out) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    reply_json_flags(resp, 200, out, JSON_COMPACT);
}

/* Decodes %XX and '+' in place. */
static void url_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end == '\0') {
                *o++ = (char)v;
                p += 2;
                continue;
            }
        }
        *o++ = *p == '+' ? ' ' : *p;
    }
    *o = '\0';
}

/* Copies the value of query parameter key into out (decoded); 0 if absent. */
static int query_param(const char *query, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen >= n)
                vlen = n - 1;
            memcpy(out, p + klen + 1, vlen);
            out[vlen] = '\0';
            url_decode(out);
            return 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

/* Marks a submitted Workload with its submission time, which orders the
 * queue; a resubmission keeps its place. */
static td_status stamp_workload(json_t *wl, td_err *err)
{
    if (!json_is_object(wl) || !td_json_str(wl, "kind") ||
        strcmp(td_json_str(wl, "kind"), "Workload") != 0)
        return td_err_set(err, TD_EINVAL, "submit takes Workload objects (kueue.x-k8s.io); "
                                          "use apply for other kinds");
    json_t *meta = json_object_get(wl, "metadata");
    if (!json_is_object(meta))
        return TD_OK; /* validation names it */
    json_t *ann = json_object_get(meta, "annotations");
    if (!ann) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    if (!json_is_object(ann) || json_object_get(ann, TD_SUBMITTED_AT))
        return TD_OK;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu",
             (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    json_object_set_new(ann, TD_SUBMITTED_AT, json_string(buf));
    return TD_OK;
}

static void handle_apply_or_submit(td_control *c, const td_http_request *req,
                                   td_http_response *resp, int submit);

static void handle_apply(td_control *c, const td_http_request *req, td_http_response *resp)
{
    handle_apply_or_submit(c, req, resp, 0);
}

static void handle_workloads(td_control *c, const td_http_request *req, td_http_response *resp)
{
    char ns[256] = "";
    query_param(req->query, "namespace", ns, sizeof ns);
    td_config *cur = td_config_ref(atomic_load(&c->snapshot));
    json_t *view = NULL;
    td_err err;
    td_status st = td_workloads_view(cur, ns, &view, &err);
    td_config_unref(cur);
    if (st != TD_OK)
        reply_error(resp, st == TD_ENOMEM ? 500 : 400, err.msg);
    else
        reply_json(resp, 200, json_pack("{s:o}", "items", view));
}

static void handle_apply_or_submit(td_control *c, const td_http_request *req,
                                   td_http_response *resp, int submit)
{
    const char *fname = td_http_header(req, "X-Tenantd-Filename");
    char name[256];
    snprintf(name, sizeof name, "%s", fname && *fname ? fname : "request");
    td_err err;
    td_manifest *m = NULL;
    if (td_manifest_parse(name, req->body, req->body_len, &m, &err) != TD_OK) {
        reply_error(resp, 400, err.msg);
        return;
    }
    if (td_manifest_count(m) == 0) {
        td_manifest_destroy(m);
        reply_error(resp, 400, "nothing to apply: the body holds no object");
        return;
    }
    td_config *prev = td_config_ref(atomic_load(&c->snapshot));
    for (size_t i = 0; submit && i < td_manifest_count(m); i++) {
        /* A resubmission (a client's retry) keeps its place and, once
         * finished, stays finished: never a second run. */
        json_t *doc = td_manifest_doc(m, i);
        td_object_id id = td_object_identity(doc);
        json_t *old = td_config_get(prev, "Workload", id.namespace_, id.name);
        json_t *oann = td_json_path(old, "metadata.annotations");
        json_t *meta = json_object_get(doc, "metadata");
        if (old && json_is_object(meta) && json_is_object(oann)) {
            json_t *ann = json_object_get(meta, "annotations");
            if (!ann) {
                ann = json_object();
                json_object_set_new(meta, "annotations", ann);
            }
            const char *keep[] = {TD_SUBMITTED_AT, TD_FINISHED_AT};
            for (size_t k = 0; json_is_object(ann) && k < 2; k++)
                if (json_object_get(oann, keep[k]))
                    json_object_set(ann, keep[k], json_object_get(oann, keep[k]));
        }
        if (stamp_workload(doc, &err) != TD_OK) {
            td_config_unref(prev);
            td_manifest_destroy(m);
            reply_error(resp, 400, err.msg);
            return;
        }
    }
    td_config_unref(prev);
    td_config *cur = td_config_ref(atomic_load(&c->snapshot));
    td_config_builder *b = NULL;
    td_config *next = NULL;
    json_t *view = NULL;
    json_t *result = json_array();
    json_t **objs = calloc(td_manifest_count(m), sizeof *objs);
    td_status st = objs && result ? td_config_builder_create(cur, &b, &err) : TD_ENOMEM;
    for (size_t i = 0; st == TD_OK && i < td_manifest_count(m); i++) {
        json_t *doc = td_manifest_doc(m, i);
        st = td_config_builder_add(b, doc, m, &err);
        if (st != TD_OK)
            break;
        td_object_id id = td_object_identity(doc);
        json_t *old = td_config_get(cur, id.kind, id.namespace_, id.name);
        const char *action = !old ? "created" : json_equal(old, doc) ? "unchanged" : "configured";
        objs[i] = doc;
        json_array_append_new(result, json_pack("{s:s, s:s, s:s, s:s}", "kind", id.kind,
                                                "namespace", id.namespace_, "name", id.name,
                                                "action", action));
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    /* The batch queue must be able to take the new objects too. */
    if (st == TD_OK)
        st = td_workloads_view(next, NULL, &view, &err);
    if (st == TD_OK) {
        st = td_control_commit(c, next, objs, td_manifest_count(m), NULL, 0, &err);
        next = NULL;
    }
    if (st == TD_OK && submit) {
        json_t *mine = json_array();
        size_t i;
        json_t *w;
        json_array_foreach(view, i, w)
        {
            for (size_t k = 0; k < td_manifest_count(m); k++) {
                td_object_id id = td_object_identity(td_manifest_doc(m, k));
                if (strcmp(id.namespace_, td_json_str(w, "namespace")) == 0 &&
                    strcmp(id.name, td_json_str(w, "name")) == 0)
                    json_array_append(mine, w);
            }
        }
        reply_json(resp, 200, json_pack("{s:o}", "workloads", mine));
    } else if (st == TD_OK) {
        reply_json(resp, 200, json_pack("{s:O}", "applied", result));
    } else if (st == TD_ENOMEM) {
        reply_error(resp, 500, "out of memory");
    } else {
        reply_error(resp, st == TD_EIO ? 503 : 400, err.msg);
    }
    td_config_unref(next);
    json_decref(view);
    json_decref(result);
    free(objs);
    td_config_builder_destroy(b);
    td_config_unref(cur);
    td_manifest_destroy(m);
}

/* POST /v1/workloads/finish?namespace=NS&name=NAME: the job runner reports
 * the admitted Workload complete. The stored Workload is marked (annotation
 * TD_FINISHED_AT) in one store transaction, not deleted, so the history the
 * queue replays survives restarts; its quota and nodes are free from then.
 * 404 unknown, 409 not admitted, 200 (again: "unchanged") once finished. */
static void handle_finish(td_control *c, const td_http_request *req, td_http_response *resp)
{
    char ns[256] = "", name[256] = "";
    query_param(req->query, "namespace", ns, sizeof ns);
    query_param(req->query, "name", name, sizeof name);
    if (!*ns)
        snprintf(ns, sizeof ns, "default");
    td_config *cur = td_config_ref(atomic_load(&c->snapshot));
    json_t *wl = td_config_get(cur, "Workload", ns, name);
    char msg[800];
    if (!*name || !wl) {
        snprintf(msg, sizeof msg, "Workload %s/%s not found", ns, name);
        reply_error(resp, 404, msg);
        td_config_unref(cur);
        return;
    }
    json_t *done = json_object_get(td_json_path(wl, "metadata.annotations"), TD_FINISHED_AT);
    if (done) {
        reply_json(resp, 200, json_pack("{s:{s:s,s:s,s:s}}", "finished", "namespace", ns, "name",
                                        name, "action", "unchanged"));
        td_config_unref(cur);
        return;
    }
    td_err err;
    json_t *view = NULL, *mine = NULL;
    td_status st = td_workloads_view(cur, ns, &view, &err);
    size_t i;
    json_t *w;
    json_array_foreach(view, i, w) if (strcmp(td_json_str(w, "name"), name) == 0) mine = w;
    const char *state = mine ? td_json_str(mine, "state") : "";
    if (st == TD_OK && strcmp(state, "Admitted") != 0) {
        snprintf(msg, sizeof msg, "Workload %s/%s is %s, not Admitted: only a running workload "
                 "can finish (%s)", ns, name, state, mine ? td_json_str(mine, "reason") : "");
        json_decref(view);
        reply_error(resp, 409, msg);
        td_config_unref(cur);
        return;
    }
    json_decref(view);
    view = NULL;
    json_t *copy = json_deep_copy(wl);
    json_t *ann = td_json_path(copy, "metadata.annotations");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu",
             (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    td_config_builder *b = NULL;
    td_config *next = NULL;
    if (st == TD_OK && (!copy || !json_is_object(ann) ||
                        json_object_set_new(ann, TD_FINISHED_AT, json_string(buf)) != 0))
        st = td_err_set(&err, TD_ENOMEM, "out of memory");
    if (st == TD_OK)
        st = td_config_builder_create(cur, &b, &err);
    if (st == TD_OK)
        st = td_config_builder_add(b, copy, NULL, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    if (st == TD_OK)
        st = td_workloads_view(next, NULL, &view, &err);
    if (st == TD_OK) {
        st = td_control_commit(c, next, &copy, 1, NULL, 0, &err);
        next = NULL;
    }
    if (st == TD_OK)
        reply_json(resp, 200, json_pack("{s:{s:s,s:s,s:s,s:s}}", "finished", "namespace", ns,
                                        "name", name, "action", "finished", "at", buf));
    else
        reply_error(resp, st == TD_ENOMEM ? 500 : st == TD_EIO ? 503 : 400, err.msg);
    json_decref(view);
    json_decref(copy);
    td_config_unref(next);
    td_config_builder_destroy(b);
    td_config_unref(cur);
}

static void handle_objects(td_control *c, const td_http_request *req, td_http_response *resp)
{
    char kind_in[128] = "", ns[256] = "", name[256] = "";
    query_param(req->query, "kind", kind_in, sizeof kind_in);
    query_param(req->query, "namespace", ns, sizeof ns);
    query_param(req->query, "name", name, sizeof name);
    const char *kind = td_kind_canonical(kind_in);
    if (!kind) {
        char msg[300];
        snprintf(msg, sizeof msg, "unknown kind \"%s\"; give ?kind= one of tenantd's kinds",
                 kind_in);
        reply_error(resp, 400, msg);
        return;
    }
    td_config *cur = td_config_ref(atomic_load(&c->snapshot));
    if (strcmp(req->method, "GET") == 0) {
        json_t *items = json_array();
        json_t *const *list;
        size_t n = td_config_list(cur, kind, *ns ? ns : NULL, &list);
        for (size_t i = 0; i < n; i++)
            if (!*name || strcmp(td_json_str(list[i], "metadata.name"), name) == 0)
                json_array_append(items, list[i]);
        if (*name && json_array_size(items) == 0) {
            char msg[700];
            snprintf(msg, sizeof msg, "%s %s%s%s not found", kind, ns, *ns ? "/" : "", name);
            json_decref(items);
            reply_error(resp, 404, msg);
        } else {
            reply_json(resp, 200, json_pack("{s:s, s:o}", "kind", kind, "items", items));
        }
        td_config_unref(cur);
        return;
    }
    /* DELETE */
    td_err err;
    td_config_builder *b = NULL;
    td_config *next = NULL;
    td_status st = td_config_builder_create(cur, &b, &err);
    if (st == TD_OK && !*name)
        st = td_err_set(&err, TD_EINVAL, "give ?name= of the object to delete");
    if (st == TD_OK)
        st = td_config_builder_delete(b, kind, ns, name, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    json_t *view = NULL;
    if (st == TD_OK && (st = td_workloads_view(next, NULL, &view, &err)) != TD_OK)
        td_err_prefix(&err, st, "deleting %s %s would break the batch queue", kind, name);
    json_decref(view);
    if (st == TD_OK) {
        td_object_id id = {kind, td_kind_namespaced(kind) ? ns : "", name};
        st = td_control_commit(c, next, NULL, 0, &id, 1, &err);
        next = NULL;
    }
    if (st == TD_OK) {
        reply_json(resp, 200, json_pack("{s:{s:s, s:s, s:s}}", "deleted", "kind", kind,
                                        "namespace", td_kind_namespaced(kind) ? ns : "", "name",
                                        name));
    } else {
        reply_error(resp, st == TD_ENOTFOUND ? 404 : st == TD_EIO ? 503 : 400, err.msg);
    }
    td_config_unref(next);
    td_config_builder_destroy(b);
    td_config_unref(cur);
}

static void handle_metrics(td_control *c, td_http_response *resp)
{
    char *text = NULL;
    size_t len = 0;
    if (!c->gateway) {
        reply_text(resp, 200, "");
        return;
    }
    if (td_gateway_metrics_text(c->gateway, &text, &len) != TD_OK) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = text;
    resp->body_len = len;
}

void td_control_handle(const td_http_request *req, td_http_response *resp, void *user)
{
    td_control *c = user;
    const char *m = req->method, *p = req->path;
    int get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
    if (strcmp(p, "/healthz") == 0 && get)
        reply_text(resp, 200, "ok\n");
    else if (strcmp(p, "/readyz") == 0 && get)
        reply_text(resp, c->ready ? 200 : 503, c->ready ? "ok\n" : "not ready\n");
    else if (strcmp(p, "/validate") == 0 && post)
        handle_review(c, req, resp, TD_REVIEW_VALIDATE);
    else if (strcmp(p, "/mutate") == 0 && post)
        handle_review(c, req, resp, TD_REVIEW_MUTATE);
    else if (strcmp(p, "/admit") == 0 && post)
        handle_review(c, req, resp, TD_REVIEW_MUTATE_AND_VALIDATE);
    else if ((strcmp(p, "/metrics") == 0 || strncmp(p, "/v1/", 4) == 0) && !authorized(c, req))
        reply_error(resp, 401, "unauthorized: this endpoint needs the admin token "
                               "(Authorization: Bearer TOKEN; tenantctl --token-file)");
    else if (strcmp(p, "/metrics") == 0 && get)
        handle_metrics(c, resp);
    else if (strcmp(p, "/v1/apply") == 0 && post)
        handle_apply(c, req, resp);
    else if (strcmp(p, "/v1/workloads") == 0 && post)
        handle_apply_or_submit(c, req, resp, 1);
    else if (strcmp(p, "/v1/workloads") == 0 && get)
        handle_workloads(c, req, resp);
    else if (strcmp(p, "/v1/workloads/finish") == 0 && post)
        handle_finish(c, req, resp);
    else if (strcmp(p, "/v1/objects") == 0 && (get || strcmp(m, "DELETE") == 0))
        handle_objects(c, req, resp);
    else if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz") || !strcmp(p, "/validate") ||
             !strcmp(p, "/mutate") || !strcmp(p, "/admit") || !strcmp(p, "/v1/apply") ||
             !strcmp(p, "/v1/objects") || !strcmp(p, "/metrics") || !strcmp(p, "/v1/workloads") ||
             !strcmp(p, "/v1/workloads/finish"))
        reply_error(resp, 405, "method not allowed");
    else
        reply_error(resp, 404, "no such endpoint; see the README's API section");
}
