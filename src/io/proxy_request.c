/* proxy_request.c - the gateway's decision for one request, in the order
 * users rely on: (a) tenant from the API key, (b) route, (c) whole body and
 * cost estimate, (d) tenant concurrency, (e) tenant rate, (f) the route's
 * criticality queue; then forwarding (proxy_upstream.c) and (h) the end:
 * cost reconciled, limits released, the queue pumped, metrics counted, one
 * access-log line. The rejections of (a)-(e) touch no upstream and allocate
 * nothing beyond the response bytes. A charge taken and then refused (shed,
 * deadline, upstream never reached) is given back. */
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/proxy_internal.h"
#include "io/gunzip.h"
#include "core/reqpath.h"
#include "core/jsondump.h"

/* ---- config views per worker ---- */

static px_cfg *cfg_acquire(px_worker *w)
{
    const td_gw_config *c = td_gateway_config(w->p->g, &w->held);
    if (!w->cfg_cur || w->cfg_cur->c != c) {
        px_cfg *n = malloc(sizeof *n);
        if (!n)
            return NULL;
        /* our own reference, so a request keeps its view past w->held's */
        atomic_fetch_add(&((td_gw_config *)c)->refs, 1);
        n->c = (td_gw_config *)c;
        n->nreq = 0;
        n->next = NULL;
        px_cfg *old = w->cfg_cur;
        w->cfg_cur = n;
        if (old && old->nreq == 0) {
            td_gw_config_unref(old->c);
            free(old);
        } else if (old) {
            old->next = w->cfg_old;
            w->cfg_old = old;
        }
    }
    w->cfg_cur->nreq++;
    return w->cfg_cur;
}

void px_cfg_release(px_worker *w, px_cfg *pc)
{
    if (!pc || --pc->nreq > 0 || pc == w->cfg_cur)
        return;
    for (px_cfg **pp = &w->cfg_old; *pp; pp = &(*pp)->next)
        if (*pp == pc) {
            *pp = pc->next;
            break;
        }
    td_gw_config_unref(pc->c);
    free(pc);
}

/* ---- responses ---- */

static const char *reason(int status)
{
    const char *r = http_status_str((enum http_status)status);
    return r && r[0] != '<' ? r : "Error";
}

/* Decimal digits of v into dst (at least 20 bytes); returns the length. */
static size_t fmt_u64(char *dst, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[n - 1 - i];
    return n;
}

/* Copies n bytes of s to dst, returning dst past them; the caller sized
 * dst. */
static char *put(char *dst, const char *s, size_t n)
{
    memcpy(dst, s, n);
    return dst + n;
}
#define PUT_LIT(d, lit) put((d), (lit), sizeof(lit) - 1)

/* The reject path answers many times faster than it proxies, so the head
 * is built with memcpy rather than a format string (vfprintf was the top
 * user-space symbol of a rejected request in perf). Same bytes as the
 * "HTTP/1.1 %d %s\r\n%s%s%sContent-Type: ...%zu\r\n%s%s\r\n" it replaces. */
void px_respond(px_conn *c, int status, const char *extra, const char *body)
{
    px_req *r = &c->rq;
    int keep = r->keep_alive && !c->stop;
    size_t blen = strlen(body);
    const char *date = px_date(c->w);
    const char *why = reason(status);
    const char *conn =
        keep ? (r->http_minor == 0 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n";
    size_t wlen = strlen(why), dlen = strlen(date), clen = strlen(conn);
    size_t elen = extra ? strlen(extra) : 0;
    /* a browser app reads tenantd's own refusals too (a 429's retry advice) */
    char cors[TD_GW_CORS_HEADERS_MAX];
    size_t corslen = r->preflight ? 0 : td_gw_cors_actual(r->cors, r->h_origin, cors, sizeof cors);
    int empty = status == 204; /* no Content-Type, Content-Length or body (RFC 9110 8.6) */
    /* fixed parts: 9 + 3 + 1 + 2 + 8 (Date) + 2 + 32 (Content-Type) + 16 + 20 + 2 + 2 */
    size_t need = 128 + wlen + dlen + clen + elen + corslen;
    char small[512], *head = need <= sizeof small ? small : malloc(need);
    td_status st = TD_ENOMEM;
    if (head) {
        char *d = PUT_LIT(head, "HTTP/1.1 ");
        d += fmt_u64(d, (uint64_t)(status < 0 ? 0 : status));
        *d++ = ' ';
        d = put(d, why, wlen);
        d = PUT_LIT(d, "\r\n");
        if (dlen) {
            d = PUT_LIT(d, "Date: ");
            d = put(d, date, dlen);
            d = PUT_LIT(d, "\r\n");
        }
        if (!empty) {
            d = PUT_LIT(d, "Content-Type: application/json\r\nContent-Length: ");
            d += fmt_u64(d, blen);
            d = PUT_LIT(d, "\r\n");
        }
        d = put(d, conn, clen);
        if (elen)
            d = put(d, extra, elen);
        if (corslen)
            d = put(d, cors, corslen);
        d = PUT_LIT(d, "\r\n");
        st = td__buf_append(&c->out, head, (size_t)(d - head));
        if (head != small)
            free(head);
    }
    if (st == TD_OK && r->method != HTTP_HEAD && !empty)
        st = td__buf_append(&c->out, body, blen);
    if (!keep || st != TD_OK)
        c->stop = 1;
    r->status = status;
}

/* An OpenAI-shaped error (docs/gateway.md "Errors"): message escaped here;
 * fields (may be NULL) is tenantd's own members, rendered JSON without
 * braces (",\"tenant\":\"x\""), kept beside message; param NULL or the
 * request field at fault. */
static void respond_error(px_conn *c, int status, const char *code, const char *msg,
                          const char *param, const char *fields, const char *extra)
{
    char esc[600], body[1200], pq[80];
    td_json_escape_to(esc, sizeof esc, msg);
    if (param)
        snprintf(pq, sizeof pq, "\"%s\"", param);
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":\"%s\",\"param\":%s%s}}", esc,
             td_gw_error_type(status, code), code, param ? pq : "null", fields ? fields : "");
    px_respond(c, status, extra, body);
}

/* Keeps a sampled record of a refusal for `tenantctl explain request`:
 * the rule and the numbers it compared. */
static void note_refusal(px_conn *c, uint16_t status, const char *reason, bool shadow,
                         const td_gw_key *k, const char *detail)
{
    px_req *r = &c->rq;
    const td_gw_tenant *t = r->tenant;
    td_proxy *p = c->w->p;
    td_recent *rec = td_gateway_recent(p->g);
    uint64_t now = px_now();
    if (!t || !rec || !td_recent_due(rec, t->slot, now))
        return;
    td_rejection x;
    memset(&x, 0, sizeof x);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x.wall_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    x.tenant = t->slot;
    x.status = status;
    x.shadow = shadow;
    snprintf(x.reason, sizeof x.reason, "%s", reason);
    if (k)
        snprintf(x.key, sizeof x.key, "%s", k->name);
    /* the model, read here when the decision did not need it (sampled:
     * at most 100 refusals a second per tenant pay for the parse) */
    if (r->model[0] || !r->body.len ||
        td_gw_body_model(r->body.p, r->body.len, x.model, sizeof x.model, NULL) != TD_OK)
        snprintf(x.model, sizeof x.model, "%s", r->model);
    const char *route = r->route ? r->route->name : "";
    td_limiter *kl = td_gateway_key_limiter(p->g);
    if (detail)
        snprintf(x.detail, sizeof x.detail, "%s", detail);
    else if (k && strcmp(reason, "rate_limited") == 0)
        snprintf(x.detail, sizeof x.detail,
                 "key %s, route %s: cost %.6g over the %.6g available (key rate %.6g per %.6gs, "
                 "burst %.6g)",
                 k->name, route, r->estimate,
                 floor(td_limiter_available(kl, k->slot, &k->rate, now) * 1000) / 1000,
                 k->rate.cost, (double)k->rate.per_ns / 1e9, k->rate.burst);
    else if (k && strcmp(reason, "concurrency_limited") == 0)
        snprintf(x.detail, sizeof x.detail, "key %s, route %s: %u in flight, key limit %u", k->name,
                 route, td_limiter_inflight(kl, k->slot), k->concurrency);
    else if (strcmp(reason, "rate_limited") == 0)
        snprintf(x.detail, sizeof x.detail,
                 "route %s: cost %.6g over the %.6g available (rate %.6g per %.6gs, burst %.6g)",
                 route, r->estimate,
                 floor(td_limiter_available(p->limiter, t->slot, &t->rate, now) * 1000) / 1000,
                 t->rate.cost, (double)t->rate.per_ns / 1e9, t->rate.burst);
    else if (strcmp(reason, "concurrency_limited") == 0)
        snprintf(x.detail, sizeof x.detail, "route %s: %u in flight, limit %u", route,
                 td_limiter_inflight(p->limiter, t->slot), t->concurrency);
    else if (r->route)
        snprintf(x.detail, sizeof x.detail,
                 "route %s (capacity %u, queue %u) %s; request criticality %s", route,
                 r->route->capacity, r->route->queue,
                 strcmp(reason, "deadline") == 0 ? "could not start before the deadline"
                                                 : "is full: the lowest criticality is shed",
                 td_criticality_name(r->crit));
    td_recent_note(rec, c->w->index, &x);
}

static void respond_shed(px_conn *c, const char *why)
{
    note_refusal(c, 503, why, false, NULL, NULL);
    char fields[300], esc[200], msg[160];
    td_json_escape_to(esc, sizeof esc, c->rq.tenant ? c->rq.tenant->name : "");
    snprintf(fields, sizeof fields, ",\"reason\":\"%s\",\"tenant\":\"%s\"", why, esc);
    snprintf(msg, sizeof msg, "%s",
             strcmp(why, "deadline") == 0
                 ? "the route could not start the request before its deadline; retry later"
                 : "the route is overloaded: the lowest criticality is shed; retry later");
    char extra[120];
    snprintf(extra, sizeof extra, "Retry-After: 1\r\nretry-after-ms: 1000\r\nX-Tenantd-Shed: %s\r\n",
             why);
    respond_error(c, 503, "overloaded", msg, NULL, fields, extra);
}

/* ,"level":"tenant"}} or ,"level":"key","key":"NAME"}} closing a 429
 * body (its error object and the body). */
static void level_tail(char *dst, size_t cap, const td_gw_key *k)
{
    if (!k) {
        snprintf(dst, cap, ",\"level\":\"tenant\"}}");
        return;
    }
    char esc[100];
    td_json_escape_to(esc, sizeof esc, k->name);
    snprintf(dst, cap, ",\"level\":\"key\",\"key\":\"%s\"}}", esc);
}

static void respond_limited_body(px_conn *c, const char *error, uint64_t retry_ns,
                                 const td_rate *rate, const char *who, const char *tail);

/* A 429 of a rate or concurrency limit at the tenant level (k NULL) or of
 * the key k's own limit. */
static void respond_limited(px_conn *c, const char *error, uint64_t retry_ns, const td_gw_key *k)
{
    note_refusal(c, 429, error, false, k, NULL);
    char tail[150];
    level_tail(tail, sizeof tail, k);
    const td_rate *rate = k ? &k->rate : &c->rq.tenant->rate;
    char who[120] = "", esc[100];
    if (k) {
        td_json_escape_to(esc, sizeof esc, k->name);
        snprintf(who, sizeof who, "key %s of ", esc);
    }
    respond_limited_body(c, error, retry_ns, rate, who, tail);
}

/* The same for the tenant's spec.gateway.models[] limit ml. */
static void respond_model_limited(px_conn *c, const char *error, uint64_t retry_ns,
                                  const td_gw_model_limit *ml)
{
    char detail[300], esc[300], tail[360], who[320];
    if (strcmp(error, "rate_limited") == 0)
        snprintf(detail, sizeof detail,
                 "model %.100s: cost %.6g over its limit (rate %.6g per %.6gs, burst %.6g)",
                 ml->model, c->rq.estimate, ml->rate.cost, (double)ml->rate.per_ns / 1e9,
                 ml->rate.burst);
    else
        snprintf(detail, sizeof detail, "model %.100s: in flight at its limit %u", ml->model,
                 ml->concurrency);
    note_refusal(c, 429, error, false, NULL, detail);
    td_json_escape_to(esc, sizeof esc, ml->model);
    snprintf(tail, sizeof tail, ",\"level\":\"model\",\"model\":\"%s\"}}", esc);
    snprintf(who, sizeof who, "model %s of ", esc);
    respond_limited_body(c, error, retry_ns, &ml->rate, who, tail);
}

/* The 429 itself: who ("key K of ", "model M of " or "", JSON-escaped)
 * names the limit in the message, tail (at most 360 bytes) closes the
 * body with its level. */
static void respond_limited_body(px_conn *c, const char *error, uint64_t retry_ns,
                                 const td_rate *rate, const char *who, const char *tail)
{
    char esc[200];
    td_json_escape_to(esc, sizeof esc, c->rq.tenant->name);
    if (retry_ns == TD_LIMITER_NEVER) {
        /* The estimate alone is over the tenant's burst: waiting will not
         * help, so no Retry-After, and x-should-retry: false keeps the
         * OpenAI SDKs from retrying; the client must ask for less. */
        char body[1600];
        snprintf(body, sizeof body,
                 "{\"error\":{\"message\":\"this request's cost %.0f exceeds the burst %.0f of "
                 "%stenant %s: waiting will not help; ask for fewer tokens\",\"type\":"
                 "\"rate_limit_error\",\"code\":\"cost_exceeds_burst\",\"param\":null,"
                 "\"limit\":\"%s\",\"tenant\":\"%s\",\"cost\":%.0f,\"burst\":%.0f%s",
                 c->rq.estimate, rate->burst, who, esc, error, esc, c->rq.estimate, rate->burst,
                 tail);
        px_respond(c, 429, "x-should-retry: false\r\n", body);
        return;
    }
    uint64_t ms = (retry_ns + 999999) / 1000000;
    uint64_t secs = (retry_ns + 999999999) / 1000000000;
    if (secs < 1)
        secs = 1;
    /* {"error":{"message":M,"type":"rate_limit_error","code":E,"param":null,
     * "tenant":T,"retry_after_ms":N,"level":...}} and Retry-After: S,
     * retry-after-ms: N, without snprintf (see px_respond). error is one of
     * our short names. */
    /* at most 120 bytes of fixed text, 40 of error, 2 x 199 of tenant,
     * 319 of who, 2 x 20 digits, 360 of tail */
    char body[1400], extra[96];
    size_t elen = strlen(error), tlen = strlen(esc);
    if (elen > 40)
        elen = 40;
    int rate_kind = error[0] == 'r';
    char *d = PUT_LIT(body, "{\"error\":{\"message\":\"");
    if (rate_kind)
        d = PUT_LIT(d, "rate limit reached for ");
    else
        d = PUT_LIT(d, "too many requests in flight for ");
    d = put(d, who, strlen(who));
    d = PUT_LIT(d, "tenant ");
    d = put(d, esc, tlen);
    d = PUT_LIT(d, "; retry after ");
    d += fmt_u64(d, ms);
    d = PUT_LIT(d, " ms\",\"type\":\"rate_limit_error\",\"code\":\"");
    d = put(d, error, elen);
    d = PUT_LIT(d, "\",\"param\":null,\"tenant\":\"");
    d = put(d, esc, tlen);
    d = PUT_LIT(d, "\",\"retry_after_ms\":");
    d += fmt_u64(d, ms);
    d = put(d, tail, strlen(tail));
    *d = '\0';
    d = PUT_LIT(extra, "Retry-After: ");
    d += fmt_u64(d, secs);
    d = PUT_LIT(d, "\r\nretry-after-ms: ");
    d += fmt_u64(d, ms);
    d = PUT_LIT(d, "\r\n");
    *d = '\0';
    px_respond(c, 429, extra, body);
}

/* nano-units as a decimal amount, trailing zeros dropped ("0.0125"). */
static void money_str(int64_t nano, char *buf, size_t cap)
{
    const char *sign = nano < 0 ? "-" : "";
    uint64_t v = nano < 0 ? (uint64_t) - (nano + 1) + 1 : (uint64_t)nano;
    snprintf(buf, cap, "%s%llu.%09llu", sign, (unsigned long long)(v / TD_MONEY_NANO),
             (unsigned long long)(v % TD_MONEY_NANO));
    char *e = buf + strlen(buf) - 1;
    while (*e == '0')
        *e-- = '\0';
    if (*e == '.')
        *e = '\0';
}

/* 429 budget_exceeded: the budget (the tenant's, or the key k's own), what
 * is spent of it, when it starts over (also as Retry-After). */
static void respond_budget(px_conn *c, const td_gw_budget *b, const td_gw_key *k,
                           const td_gw_model_budget *mb, int64_t spent, int64_t now_s)
{
    px_req *r = &c->rq;
    int64_t start, end;
    td_period_bounds(b->period, now_s, &start, &end);
    char amount[40], sp[40], est[40], resets[32], esc[200], detail[300], who[120], tail[140];
    money_str(b->amount_nano, amount, sizeof amount);
    money_str(spent, sp, sizeof sp);
    money_str(r->bud.reserved_nano, est, sizeof est);
    td_rfc3339(end, resets, sizeof resets);
    const char *cur = td_costpolicy_currency(r->cfg->c->cost_policy);
    who[0] = '\0';
    if (k)
        snprintf(who, sizeof who, "key %s, ", k->name);
    else if (mb)
        snprintf(who, sizeof who, "model %.80s (budget for %.60s), ", r->model, mb->name);
    snprintf(detail, sizeof detail,
             "%sroute %s: %s budget %s %s, spent %s, this request's estimate %s; resets at %s", who,
             r->route->name, td_period_name(b->period), amount, cur, sp, est, resets);
    note_refusal(c, 429, "budget_exceeded", false, k, detail);
    td_json_escape_to(esc, sizeof esc, r->tenant->name);
    level_tail(tail, sizeof tail, k);
    tail[strlen(tail) - 2] = '\0'; /* without its closing braces */
    char body[1700], extra[120], msg[500], model[300] = "";
    if (mb) {
        char m[200];
        td_json_escape_to(m, sizeof m, r->model);
        snprintf(model, sizeof model, ",\"model\":\"%s\"", m);
    }
    int64_t wait_s = end - now_s > 0 ? end - now_s : 1;
    td_json_escape_to(msg, sizeof msg, detail);
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"budget exceeded: %s\",\"type\":\"insufficient_quota\","
             "\"code\":\"budget_exceeded\",\"param\":null,\"tenant\":\"%s\"%s%s,"
             "\"period\":\"%s\",\"budget\":%s,\"spent\":%s,\"estimate\":%s,"
             "\"currency\":\"%s\",\"resetsAt\":\"%s\",\"retry_after_ms\":%lld}}",
             msg, esc, tail, model, td_period_name(b->period), amount, sp, est, cur, resets,
             (long long)wait_s * 1000);
    /* A reset more than a minute away is not worth a client's wait (the
     * OpenAI SDKs would sleep it): x-should-retry: false says so. */
    snprintf(extra, sizeof extra, "Retry-After: %lld\r\nretry-after-ms: %lld\r\n%s",
             (long long)wait_s, (long long)wait_s * 1000,
             wait_s > 60 ? "x-should-retry: false\r\n" : "");
    px_respond(c, 429, extra, body);
}

/* A shadow budget that would have refused: counted and noted, and the
 * request goes on. */
static void note_shadow_budget(px_conn *c, const td_gw_budget_note *n)
{
    px_req *r = &c->rq;
    td_metrics_limit_rejection(c->w->p->metrics, r->tenant->slot,
                               n->key ? TD_LIMIT_KEY_BUDGET : TD_LIMIT_BUDGET, true);
    char amount[40], sp[40], who[120], detail[300];
    money_str(n->budget->amount_nano, amount, sizeof amount);
    money_str(n->spent_nano, sp, sizeof sp);
    who[0] = '\0';
    if (n->key)
        snprintf(who, sizeof who, "key %s, ", n->key->name);
    else if (n->model)
        snprintf(who, sizeof who, "model %.40s (budget for %.40s), ", r->model, n->model->name);
    snprintf(detail, sizeof detail, "%sroute %s: %s budget %s, spent %s (shadow)", who,
             r->route->name, td_period_name(n->budget->period), amount, sp);
    note_refusal(c, 429, "budget_exceeded", true, n->key, detail);
    if (!r->shadow)
        r->shadow = "budget_exceeded";
}

/* ---- the access log ---- */

void px_log_flush(px_worker *w)
{
    FILE *f = w->p->access_log;
    if (f && w->log.len) {
        flockfile(f);
        fwrite(w->log.p, 1, w->log.len, f);
        fflush(f);
        funlockfile(f);
    }
    w->log.len = 0;
    if (w->log.p)
        w->log.p[0] = '\0';
    if (w->log.cap > (1u << 20))
        td__buf_fini(&w->log);
}

/* A logfmt value: bare when safe, else quoted with escapes. */
static void log_value(td__buf *b, const char *s, size_t n)
{
    int bare = n > 0;
    for (size_t i = 0; i < n && bare; i++) {
        unsigned char ch = (unsigned char)s[i];
        bare = ch > 0x20 && ch < 0x7f && ch != '"' && ch != '=' && ch != '\\';
    }
    if (bare) {
        td__buf_append(b, s, n);
        return;
    }
    td__buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            td__buf_printf(b, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            td__buf_printf(b, "\\x%02x", ch);
        else
            td__buf_append(b, s + i, 1);
    }
    td__buf_append(b, "\"", 1);
}

static double ms_between(uint64_t a, uint64_t b)
{
    return b > a ? (double)(b - a) / 1e6 : 0;
}

static void log_line(px_conn *c, const char *outcome, double cost, int ep)
{
    px_req *r = &c->rq;
    td__buf *b = &c->w->log;
    struct timespec ts;
    struct tm tm;
    char when[40] = "-";
    clock_gettime(CLOCK_REALTIME, &ts);
    if (gmtime_r(&ts.tv_sec, &tm)) {
        size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
    }
    uint64_t queue_end = r->t_started ? r->t_started : r->t_end;
    td__buf_printf(b, "ts=%s tenant=", when);
    const char *tn = r->tenant ? r->tenant->name : "";
    log_value(b, tn, strlen(tn));
    td__buf_append(b, " route=", 7);
    const char *rn = r->route ? r->route->name : "";
    log_value(b, rn, strlen(rn));
    td__buf_printf(b, " crit=%s method=%s path=", r->route ? td_criticality_name(r->crit) : "-",
                   http_method_str((enum http_method)r->method));
    if (r->url.p && r->path_off != SIZE_MAX && r->path_off < r->url.len)
        log_value(b, r->url.p + r->path_off, r->path_len);
    else
        td__buf_append(b, "/", 1);
    td__buf_printf(b,
                   " status=%d outcome=%s%s%s cost_est=%g cost=%g queue_ms=%.3f upstream_ms=%.3f "
                   "total_ms=%.3f peer=%s%s",
                   r->status ? r->status : 499, outcome, r->shadow ? " shadow_would=" : "",
                   r->shadow ? r->shadow : "", r->estimate, cost,
                   r->t_decided ? ms_between(r->t_decided, queue_end) : 0.0,
                   r->t_started ? ms_between(r->t_started, r->t_end) : 0.0,
                   ms_between(r->t_start, r->t_end), c->peer,
                   r->usage_counted ? " usage=counted" : "");
    /* the model and the endpoint it was sent to, after the fields readers
     * already split on ("-": none) */
    td__buf_append(b, " model=", 7);
    if (r->model[0])
        log_value(b, r->model, strlen(r->model));
    else
        td__buf_append(b, "-", 1);
    if (r->rs && ep >= 0 && (size_t)ep < r->rs->neps)
        td__buf_printf(b, " endpoint=%s:%u\n", r->rs->eps[ep].host, (unsigned)r->rs->eps[ep].port);
    else
        td__buf_append(b, " endpoint=-\n", 12);
    if (b->len > 32 * 1024)
        px_log_flush(c->w);
}

/* ---- the end of a request ---- */

static void copy_label(char *dst, size_t n, const char *s)
{
    size_t len = s ? strnlen(s, n - 1) : 0;
    if (len)
        memcpy(dst, s, len);
    dst[len] = 0;
}

/* The request's ledger record (without its id): what the budget settles to
 * and what meter() appends; never a wait on SQLite. */
static void build_rec(px_conn *c, td_outcome outcome, uint64_t now, td_ledger_rec *out)
{
    px_req *r = &c->rq;
    const td_gw_tenant *t = r->tenant;
    td_ledger_rec rec;
    /* Only the used prefix of the strings matters to the ledger; clearing
     * the whole record would cost more than the rest of this function. */
    rec.kind = TD_LEDGER_REQUEST;
    rec.id[0] = 0; /* meter() numbers it */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    rec.end_ns = wall;
    rec.start_ns = wall - (int64_t)(now - r->t_start);
    copy_label(rec.tenant, sizeof rec.tenant, t->name);
    copy_label(rec.team, sizeof rec.team, t->team);
    copy_label(rec.project, sizeof rec.project, t->project);
    copy_label(rec.environment, sizeof rec.environment, t->environment);
    copy_label(rec.route, sizeof rec.route, r->route ? r->route->name : "");
    copy_label(rec.api_key, sizeof rec.api_key, r->key && r->key->name ? r->key->name : "");
    copy_label(rec.model, sizeof rec.model, r->model);
    rec.workload[0] = rec.cluster_queue[0] = rec.flavor[0] = 0;
    /* "client_closed" and "cut" are charged what they were delivered
     * (settle_early); "cancelled" never reached the upstream */
    const char *o = "error";
    switch (outcome) {
    case TD_OUT_ACCEPTED: o = "ok"; break;
    case TD_OUT_RATE_LIMITED:
    case TD_OUT_CONCURRENCY_LIMITED:
    case TD_OUT_BAD_REQUEST:
    case TD_OUT_NO_ROUTE:
    case TD_OUT_UNAUTHORIZED:
    case TD_OUT_BUDGET_EXCEEDED:
        o = "rejected";
        break;
    case TD_OUT_SHED: o = "shed"; break;
    case TD_OUT_CLIENT_CLOSED: o = r->charged ? "client_closed" : "cancelled"; break;
    case TD_OUT_BUDGET_CUT: o = "cut"; break;
    case TD_OUT_TIMEOUT: o = r->charged ? "cut" : "timeout"; break;
    default: o = r->charged ? "cut" : "error"; break;
    }
    copy_label(rec.outcome, sizeof rec.outcome, o);
    rec.interruptible = false;
    rec.count = 1;
    int ok = outcome == TD_OUT_ACCEPTED || r->charged;
    rec.tokens_in = ok ? r->tokens_in : 0;
    rec.tokens_out = ok ? r->tokens_out : 0;
    rec.gpu_milli_seconds = ok ? r->gpu_milli_seconds : 0;
    rec.gpu_milli = rec.cpu_milli = rec.memory_bytes = rec.storage_bytes = 0;
    rec.gpu_used_milli = -1;
    *out = rec;
}

static void meter_id(px_worker *w, td_ledger_rec *rec)
{
    snprintf(rec->id, sizeof rec->id, "%s-%u-%llu", w->p->replica_id, w->index,
             (unsigned long long)++w->ledger_seq);
}

void px_meter_flush(px_worker *w)
{
    for (size_t i = 0; i < PX_METER_AGG; i++) {
        px_meter_agg *a = &w->agg[i];
        if (!a->used)
            continue;
        meter_id(w, &a->rec);
        td_ledger_append(w->p->ledger, &a->rec);
        a->used = 0;
    }
}

/* Adds the request's record to its tenant, route, key, model and outcome's
 * aggregate (count, tokens and GPU-seconds summed; the earliest start, the
 * latest end), which the worker's tick appends to the ledger every
 * PX_METER_FLUSH_MS: the ledger writes a record per aggregate, not one per
 * request, whether it is served or refused. */
static void meter(px_conn *c, const td_ledger_rec *rec)
{
    px_worker *w = c->w;
    px_req *r = &c->rq;
    uint32_t tenant_slot = r->tenant->slot;
    uint32_t route_slot = r->route ? r->route->slot : TD_METRICS_NONE;
    px_meter_agg *free_slot = NULL;
    for (size_t i = 0; i < PX_METER_AGG; i++) {
        px_meter_agg *a = &w->agg[i];
        if (!a->used) {
            if (!free_slot)
                free_slot = a;
        } else if (a->tenant_slot == tenant_slot && a->route_slot == route_slot &&
                   strcmp(a->rec.outcome, rec->outcome) == 0 &&
                   strcmp(a->rec.api_key, rec->api_key) == 0 &&
                   strcmp(a->rec.model, rec->model) == 0) {
            a->rec.count++;
            a->rec.tokens_in += rec->tokens_in;
            a->rec.tokens_out += rec->tokens_out;
            a->rec.gpu_milli_seconds += rec->gpu_milli_seconds;
            if (rec->end_ns > a->rec.end_ns)
                a->rec.end_ns = rec->end_ns;
            if (rec->start_ns < a->rec.start_ns)
                a->rec.start_ns = rec->start_ns;
            return;
        }
    }
    if (!free_slot) {
        px_meter_flush(w);
        free_slot = &w->agg[0];
    }
    free_slot->used = 1;
    free_slot->tenant_slot = tenant_slot;
    free_slot->route_slot = route_slot;
    free_slot->rec = *rec;
}

int px_budget_extend(px_conn *c, double tokens)
{
    px_req *r = &c->rq;
    if (tokens <= r->covered_tokens)
        return 0;
    if (!r->bud.n && !r->bud.nkey && !r->bud.nmodel)
        return 0;
    /* A quarter of the reservation's tokens more at a time keeps a long
     * stream to a few reservations and pricings (a stream's events come
     * one by one: pricing each cost 17% more CPU on a budgeted
     * 100,001-token stream); when that much is not left, exactly
     * what the tokens forwarded cost, so a stream is cut only when the
     * budget cannot pay for what it would deliver. An extension counts as
     * spent at once (settled to itself); px_req_end settles the rest. */
    double step = ceil(r->reserve_tokens / 4);
    double want[2] = {tokens + (step > 1 ? step : 1), tokens};
    int64_t held = r->bud.reserved_nano + r->bud_extra_nano;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    td_gateway *g = c->w->p->g;
    for (int i = 0; i < 2; i++) {
        int64_t ask = td_gw_price_units(r->cfg->c, r->route, r->tenant, r->model, want[i]) - held;
        if (ask > 0) {
            td_gw_budget_hold h;
            td_gw_budget_verdict v;
            if (td_gateway_budget_reserve(g, r->tenant, r->key, r->model, ask,
                                          (int64_t)wall.tv_sec, &h, &v) != TD_OK)
                continue;
            td_gateway_budget_settle(g, r->tenant, r->key, &h, ask);
            r->bud_extra_nano += ask;
        }
        r->covered_tokens = want[i];
        return 0;
    }
    return -1;
}

/* (h) A request that ended before its response did, after it was sent
 * upstream, is charged what it was delivered, whatever ended it: the
 * client closing (even before the first byte: the upstream's work until
 * then cannot be seen, so closing is never cheaper than the reservation),
 * the upstream closing or going silent mid-body, the budget cutting the
 * stream. td_cost_settle_cut says how much: max(tokens counted in the body
 * forwarded, the reservation), or the usage when the upstream reported
 * it. An upstream that failed (502) or timed out (504) before any byte of
 * its answer is not charged: the client got nothing. Sets r->charged and
 * the usage the ledger records. */
static void settle_early(px_conn *c, td_outcome o)
{
    px_req *r = &c->rq;
    if (o == TD_OUT_ACCEPTED || !r->sent || !r->route)
        return;
    if (!r->resp_started && o != TD_OUT_CLIENT_CLOSED)
        return;
    const td_gw_route *route = r->route;
    r->charged = 1;
    double slot_s = r->t_started ? (double)(px_now() - r->t_started) / 1e9 : 0;
    r->gpu_milli_seconds = (int64_t)(slot_s * 1000 + 0.5);
    if (route->cost_model == TD_COST_TOKENS) {
        td_usage seen;
        const td_usage *sp = NULL;
        if (r->scan_on) {
            seen = r->scan.found;
            sp = &seen;
        }
        double in, out;
        td_cost_settle_cut(sp, r->prompt_est, r->reserve_tokens, &in, &out);
        if (!sp || !(sp->have & (TD_USAGE_TOTAL | TD_USAGE_PROMPT | TD_USAGE_COMPLETION)))
            r->usage_counted = 1;
        r->tokens_in = (int64_t)ceil(in);
        r->tokens_out = (int64_t)ceil(out);
        r->actual = (double)(r->tokens_in + r->tokens_out);
    } else {
        r->actual = r->estimate;
        if (route->cost_model == TD_COST_GPU_SECONDS)
            r->gpu_milli_seconds = (int64_t)(r->estimate * 1000 + 0.5);
    }
}

void px_req_end(px_conn *c, int outcome)
{
    px_req *r = &c->rq;
    px_worker *w = c->w;
    td_proxy *p = w->p;
    uint64_t now = px_now();
    if (r->state == RQ_IDLE && !r->cfg) {
        /* input that never became a request (garbage before a request
         * line): counted, not logged */
        if (outcome >= 0)
            td_metrics_request(p->metrics, TD_METRICS_NONE, TD_METRICS_NONE, (td_outcome)outcome, 0,
                               0);
        return;
    }
    r->t_end = now;
    px_route *rs = r->rs;
    const td_gw_tenant *t = r->tenant;
    int pump = 0;
    /* a request whose head was complete is counted, ledgered and settled
     * like any other when its client goes away */
    if (outcome < 0 && r->headers_done)
        outcome = TD_OUT_CLIENT_CLOSED;
    if (outcome >= 0)
        settle_early(c, (td_outcome)outcome);
    if (r->up)
        px_up_abandon(c);
    int sent_ep = r->ep; /* for the access log */
    px_ep_release(c);
    if (r->queued && rs) {
        td_critqueue_cancel(rs->q, c);
        td_metrics_queue_add(p->metrics, r->route->slot, r->crit, -1);
        r->queued = 0;
    }
    if (r->cq_started && rs) {
        td_critqueue_done_tenant(rs->q, t->slot, now - r->t_started);
        r->cq_started = 0;
        pump = 1;
    }
    /* it went upstream: its cost counts, charged or (shadow) not */
    double cost = r->ch.rate_charged || r->shadow ? r->actual : 0;
    if (r->ch.conc_held)
        td_metrics_inflight_add(p->metrics, t->slot, -1);
    td_gw_charges_release(p->g, t, r->key, &r->ch, r->estimate, r->actual, now);
    if (outcome >= 0)
        td_metrics_request(p->metrics, t ? t->slot : TD_METRICS_NONE,
                           r->route ? r->route->slot : TD_METRICS_NONE, (td_outcome)outcome,
                           now - r->t_start, cost);
    if (outcome == TD_OUT_SHED)
        td_metrics_shed(p->metrics, t ? t->slot : TD_METRICS_NONE,
                        r->route ? r->route->slot : TD_METRICS_NONE, r->crit);
    if (p->access_log && r->headers_done)
        log_line(c, outcome >= 0 ? td_outcome_name((td_outcome)outcome) : "client_closed", cost,
                 sent_ep);
    if (t && ((p->ledger && outcome >= 0) || r->bud.n || r->bud.nkey || r->bud.nmodel)) {
        td_ledger_rec rec;
        build_rec(c, outcome >= 0 ? (td_outcome)outcome : TD_OUT_UPSTREAM_ERROR, now, &rec);
        if (r->bud.n || r->bud.nkey || r->bud.nmodel) {
            /* settle the reservations (the tenant's and the key's) to the
             * price of what the ledger records: completed requests cost
             * their usage, those ended early what they were delivered
             * (settle_early), others nothing. A stream's extensions are
             * spent already. */
            int64_t price = 0;
            if ((outcome == TD_OUT_ACCEPTED || r->charged) &&
                td_gw_price(r->cfg->c, &rec, &price, NULL) != TD_OK)
                price = r->bud.reserved_nano + r->bud_extra_nano;
            td_gateway_budget_settle(p->g, t, r->key, &r->bud, price - r->bud_extra_nano);
            r->bud_extra_nano = 0;
        }
        if (p->ledger && outcome >= 0)
            meter(c, &rec);
    }
    r->state = RQ_IDLE;
    r->headers_done = 0;
    r->cors = NULL;
    r->h_origin = NULL; /* it points into hdr, which the next request reuses */
    r->tenant = NULL;
    r->key = NULL;
    r->route = NULL;
    r->rs = NULL;
    px_cfg_release(w, r->cfg);
    r->cfg = NULL;
    if (rs) {
        if (pump)
            px_route_pump(rs);
        px_route_unref(rs);
    }
}

#define PX_TIMEOUT_BODY(where)                                                                     \
    "{\"error\":{\"message\":\"the request timed out in the " where                                  \
    "\",\"type\":\"server_error\",\"code\":\"timeout\",\"param\":null,\"where\":\"" where "\"}}"

/* An answer given outside the client's own parse loop. */
static void end_async(px_conn *c, int outcome)
{
    px_req_end(c, outcome);
    if (px_flush(c) == 0)
        px_conn_request_done(c);
}

void px_req_abort(px_conn *c)
{
    px_req *r = &c->rq;
    if (r->state == RQ_QUEUED || (r->state == RQ_UPSTREAM && !r->up))
        r->actual = 0; /* never reached the upstream */
    px_timer_set(c, TM_NONE, 0);
    px_req_end(c, -1);
}

void px_req_timeout(px_conn *c)
{
    px_req *r = &c->rq;
    if (r->state == RQ_QUEUED) {
        r->actual = 0;
        px_respond(c, 504, NULL, PX_TIMEOUT_BODY("queue"));
        end_async(c, TD_OUT_TIMEOUT);
    } else if (r->state == RQ_UPSTREAM && !r->resp_started) {
        px_up_abandon(c);
        px_respond(c, 504, NULL, PX_TIMEOUT_BODY("upstream"));
        end_async(c, TD_OUT_TIMEOUT);
    } else if (r->state == RQ_UPSTREAM) {
        /* mid-body: the status is out; only closing tells the client */
        px_up_abandon(c);
        px_req_end(c, TD_OUT_TIMEOUT);
        px_conn_close(c);
    }
}

/* A queued request the queue shed to make room for a more critical one. */
static void shed_evicted(px_conn *v)
{
    px_req *r = &v->rq;
    r->queued = 0;
    td_metrics_queue_add(v->w->p->metrics, r->route->slot, r->crit, -1);
    r->actual = 0;
    px_timer_set(v, TM_NONE, 0);
    respond_shed(v, "overload");
    end_async(v, TD_OUT_SHED);
}

void px_route_pump(px_route *rs)
{
    if (rs->pumping) {
        rs->pump_again = 1;
        return;
    }
    rs->pumping = 1;
    rs->refs++;
    do {
        rs->pump_again = 0;
        td_cq_item it;
        int k;
        while (!rs->w->stopping && (k = td_critqueue_next(rs->q, px_now(), &it)) != 0) {
            px_conn *v = it.req;
            px_req *r = &v->rq;
            r->queued = 0;
            td_metrics_queue_add(rs->w->p->metrics, r->route->slot, r->crit, -1);
            px_timer_set(v, TM_NONE, 0);
            if (k == 2) {
                r->actual = 0;
                px_respond(v, 504, NULL, PX_TIMEOUT_BODY("queue"));
                end_async(v, TD_OUT_TIMEOUT);
            } else {
                r->cq_started = 1;
                r->t_started = px_now();
                px_forward(v);
            }
        }
    } while (rs->pump_again);
    rs->pumping = 0;
    px_route_unref(rs);
}

/* ---- the decision ---- */

#define METHOD_BODY                                                                                \
    PX_ERROR_BODY("the route does not forward this method", "invalid_request_error",              \
                  "method_not_allowed")
#define NO_ROUTE_BODY                                                                              \
    PX_ERROR_BODY("no route serves this path", "invalid_request_error", "no_route")

static void set_reject(px_req *r, int status, const char *body, td_outcome o)
{
    if (r->reject_status)
        return;
    r->reject_status = status;
    r->reject_error = body;
    r->reject_outcome = o;
}

/* Refuses (400, 0 otherwise) a request whose Connection headers name a
 * field that must reach the upstream as tenantd set it, as Envoy's
 * sanitizeConnectionHeader refuses X-Forwarded-* and pseudo-headers: Host
 * (the upstream would get no Host), the framing (Content-Length,
 * Transfer-Encoding), X-Forwarded-For/-Host/-Proto (the client's origin
 * would be masked) and X-Tenantd-* (tenantd's word to the upstream); and,
 * like Envoy, ten or more nominated fields. Other names are dropped as
 * hop-by-hop (RFC 9110 7.6.1). */
static int connection_check(px_req *r)
{
    static const char *const kept[] = {"host",
                                       "content-length",
                                       "transfer-encoding",
                                       "x-forwarded-for",
                                       "x-forwarded-host",
                                       "x-forwarded-proto",
                                       NULL};
    size_t ntok = 0;
    const char *bad = NULL;
    size_t badlen = 0;
    for (size_t i = 0; r->n_connection && i < r->n_ix && !bad; i++) {
        if (strcasecmp(r->hdr.p + r->ix[i].name_off, "connection") != 0)
            continue;
        for (const char *t = r->hdr.p + r->ix[i].value_off; *t && !bad;) {
            while (*t == ' ' || *t == '\t' || *t == ',')
                t++;
            size_t k = strcspn(t, ", \t");
            if (!k)
                break;
            ntok++;
            int refuse = t[0] == ':' || (k >= 10 && strncasecmp(t, "x-tenantd-", 10) == 0);
            for (size_t j = 0; !refuse && kept[j]; j++)
                refuse = strlen(kept[j]) == k && strncasecmp(t, kept[j], k) == 0;
            if (refuse) {
                bad = t;
                badlen = k;
            }
            t += k;
        }
    }
    if (!bad && ntok < 10)
        return 0;
    char msg[200], esc[260];
    if (bad)
        snprintf(msg, sizeof msg,
                 "Connection names %.*s, a field that must reach the upstream as tenantd sets it",
                 (int)(badlen > 64 ? 64 : badlen), bad);
    else
        snprintf(msg, sizeof msg, "Connection names %zu fields (at most 9)", ntok);
    td_json_escape_to(esc, sizeof esc, msg);
    snprintf(r->reject_body, sizeof r->reject_body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"code\":"
             "\"bad_request\",\"param\":null,\"reason\":\"bad_connection\"}}",
             esc);
    set_reject(r, 400, r->reject_body, TD_OUT_BAD_REQUEST);
    return -1;
}

/* Normalizes the request target in place (reqpath.h), so that routing,
 * billing, the access log and the upstream all see the same path: an
 * origin-form "/p?q" as a whole, an absolute-form "http://host/p?q" from
 * its path on (the scheme and authority are only checked for bytes that
 * have no place in a target). 0, or -1 with a 400 set as the refusal. */
static int normalize_target(px_req *r)
{
    if (r->path_normalized)
        return 0;
    char *u = r->url.p;
    size_t len = r->url.len, off = 0;
    td_err err;
    err.msg[0] = '\0';
    if (r->path_off != SIZE_MAX && r->path_off > 0) {
        for (size_t i = 0; i < r->path_off; i++) {
            unsigned char ch = (unsigned char)u[i];
            if (ch <= 0x20 || ch == 0x7f || ch == '#') {
                snprintf(err.msg, sizeof err.msg,
                         "the request target has a control byte, whitespace or '#' (0x%02x) "
                         "at offset %zu",
                         ch, i);
                break;
            }
        }
        off = r->path_off;
    } else if (r->path_off == SIZE_MAX) {
        snprintf(err.msg, sizeof err.msg,
                 "the request target must be a path (origin-form) or an absolute URL with one");
    }
    size_t n_out = 0, plen = 0;
    if (!err.msg[0] && td_reqpath_normalize(u + off, len - off, &n_out, &plen, &err) == TD_OK) {
        r->url.len = off + n_out;
        u[r->url.len] = '\0';
        r->path_len = plen;
        r->path_normalized = 1;
        return 0;
    }
    char esc[300];
    td_json_escape_to(esc, sizeof esc, err.msg);
    snprintf(r->reject_body, sizeof r->reject_body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"code\":"
             "\"bad_request\",\"param\":null,\"reason\":\"bad_path\"}}",
             esc);
    set_reject(r, 400, r->reject_body, TD_OUT_BAD_REQUEST);
    return -1;
}

/* ---- CORS and the body's coding ---- */

/* The value of the first field named name (lower case) in r, or NULL.
 * Every request asks for two names: the first byte spares most compares. */
static const char *req_header(const px_req *r, const char *name)
{
    for (size_t i = 0; i < r->n_ix; i++) {
        const char *n = r->hdr.p + r->ix[i].name_off;
        if ((n[0] | 0x20) == name[0] && strcasecmp(n, name) == 0)
            return r->hdr.p + r->ix[i].value_off;
    }
    return NULL;
}

/* The CORS policy of r's normalized path (td_gw_cors_for_path). */
static const td_gw_cors *path_cors(px_req *r, const td_gw_config *cfg)
{
    char *end = r->url.p + r->path_off + r->path_len;
    char saved = *end;
    *end = '\0';
    const td_gw_cors *p = td_gw_cors_for_path(cfg, r->url.p + r->path_off);
    *end = saved;
    return p;
}

/* A browser's preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) on a path with a CORS policy is answered
 * by tenantd, before and without any key: 1 (r->preflight set, or a bad
 * target refused), 0 for any other request. */
static int cors_preflight(px_req *r, const td_gw_config *cfg)
{
    if (r->method != HTTP_OPTIONS || !r->h_origin ||
        !req_header(r, "access-control-request-method"))
        return 0;
    if (normalize_target(r) != 0)
        return 1;
    r->cors = path_cors(r, cfg);
    r->preflight = r->cors != NULL;
    return r->preflight;
}

/* Content-Encoding: none or identity, gzip (inflated at the message), or
 * refused with 415 before the body is used. */
static void content_coding(px_req *r)
{
    td_coding coding = TD_CODING_IDENTITY;
    char bad[40] = "";
    for (size_t i = 0; i < r->n_ix; i++) {
        const char *n = r->hdr.p + r->ix[i].name_off;
        if ((n[0] | 0x20) == 'c' && strcasecmp(n, "content-encoding") == 0)
            td_gunzip_coding(r->hdr.p + r->ix[i].value_off, &coding, bad, sizeof bad);
    }
    r->body_gzip = coding == TD_CODING_GZIP;
    if (coding != TD_CODING_OTHER)
        return;
    char msg[200], esc[260];
    snprintf(msg, sizeof msg,
             "Content-Encoding %s is not supported: send the body as it is, or with gzip", bad);
    td_json_escape_to(esc, sizeof esc, msg);
    snprintf(r->reject_body, sizeof r->reject_body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"code\":"
             "\"unsupported_media_type\",\"param\":null}}",
             esc);
    set_reject(r, 415, r->reject_body, TD_OUT_BAD_REQUEST);
}

void px_req_headers(px_conn *c)
{
    px_req *r = &c->rq;
    px_worker *w = c->w;
    td_proxy *p = w->p;
    r->tenant = NULL;
    r->route = NULL;
    r->rs = NULL;
    r->reject_status = 0;
    r->reject_error = NULL;
    r->reject_extra = NULL;
    r->route_by_model = r->models_list = 0;
    r->model[0] = '\0';
    r->estimate = r->actual = 0;
    r->cq_started = r->queued = 0;
    r->key = NULL;
    memset(&r->ch, 0, sizeof r->ch);
    r->bud.n = r->bud.nkey = r->bud.nmodel = 0;
    r->bud.reserved_nano = 0;
    r->prompt_est = 0;
    r->reserve_tokens = r->covered_tokens = 0;
    r->bud_extra_nano = 0;
    r->sent = r->charged = r->cut_check = r->cut_pending = r->budget_cut = 0;
    r->cut_slack = 0;
    r->usage_counted = 0;
    r->shadow = NULL;
    r->up = NULL;
    r->retried = 0;
    r->ep = r->ep_failed = -1;
    r->resp_started = r->resp_chunked = r->resp_close = r->resp_status = 0;
    r->scan_on = 0;
    r->have_gpu_hdr = 0;
    r->tokens_in = r->tokens_out = r->gpu_milli_seconds = 0;
    r->status = 0;
    r->crit = TD_CRIT_CRITICAL;
    r->deadline_ns = 0;
    r->t_decided = r->t_started = r->t_first_byte = r->t_end = 0;
    r->cors = NULL;
    r->h_origin = req_header(r, "origin");
    r->preflight = r->path_normalized = r->body_gzip = r->body_inflated = 0;
    r->cfg = cfg_acquire(w);
    if (!r->cfg) {
        set_reject(r, 503,
                   PX_ERROR_BODY("tenantd is out of memory; retry later", "server_error",
                                 "overloaded"),
                   TD_OUT_SHED);
    } else if (!cors_preflight(r, r->cfg->c)) {
        const td_gw_config *cfg = r->cfg->c;
        /* (a) who: a Bearer key, or in demo mode only, a trusted name */
        r->tenant = td_gw_decide_auth(cfg, r->h_auth, r->h_xtenant, td_gateway_allow_x_tenant(p->g),
                                      &c->auth, &r->key);
        if (!r->tenant) {
            set_reject(r, 401,
                       PX_ERROR_BODY("no valid API key: send Authorization: Bearer KEY",
                                     "authentication_error", "unauthorized"),
                       TD_OUT_UNAUTHORIZED);
        } else if (!c->conn_counted) {
            /* a connection counts for the tenant of its first request */
            if (td_gateway_conn_acquire(p->g, r->tenant->slot, r->tenant->max_connections)) {
                c->conn_counted = 1;
                c->conn_tenant = r->tenant->slot;
            } else {
                r->keep_alive = 0;
                char esc[200];
                td_json_escape_to(esc, sizeof esc, r->tenant->name);
                snprintf(r->reject_body, sizeof r->reject_body,
                         "{\"error\":{\"message\":\"tenant %s has its maxConnections open; reuse "
                         "one\",\"type\":\"rate_limit_error\",\"code\":\"too_many_connections\","
                         "\"param\":null,\"tenant\":\"%s\"}}",
                         esc, esc);
                set_reject(r, 429, r->reject_body, TD_OUT_CONCURRENCY_LIMITED);
            }
        }
        const char *method = http_method_str((enum http_method)r->method);
        if (r->tenant && !r->reject_status && td_gw_method_refused(method))
            set_reject(r, 405, METHOD_BODY, TD_OUT_BAD_REQUEST);
        if (r->tenant && !r->reject_status && connection_check(r) == 0 &&
            normalize_target(r) == 0) {
            /* (b) where: the normalized path alone, NUL-terminated for the
             * lookup; when the route depends on the body's "model", after
             * the body (px_req_message) */
            char *end = r->url.p + r->path_off + r->path_len;
            char saved = *end;
            *end = '\0';
            td_gw_path_verdict pv = td_gw_decide_path(cfg, r->tenant, r->key, method,
                                                      r->url.p + r->path_off, &r->route);
            *end = saved;
            if (pv == TD_GW_PATH_MODELS_LIST) {
                r->models_list = 1; /* answered here, never forwarded */
            } else if (pv == TD_GW_PATH_NO_ROUTE) {
                set_reject(r, 404, NO_ROUTE_BODY, TD_OUT_NO_ROUTE);
            } else if (pv == TD_GW_PATH_BY_MODEL) {
                r->route_by_model = 1;
            } else if (pv == TD_GW_PATH_METHOD) {
                snprintf(r->allow_hdr, sizeof r->allow_hdr, "Allow: %s\r\n", r->route->allow);
                r->reject_extra = r->allow_hdr;
                set_reject(r, 405, METHOD_BODY, TD_OUT_BAD_REQUEST);
            }
        }
    }
    if (r->cfg && !r->preflight) {
        /* the path's policy already for a refusal before the route (a 401) */
        if (r->h_origin && normalize_target(r) == 0)
            r->cors = r->route && r->route->cors ? r->route->cors : path_cors(r, r->cfg->c);
        if (!r->reject_status)
            content_coding(r);
    }
    http_parser *hp = &c->parser;
    int has_body = (hp->flags & F_CHUNKED) || ((hp->flags & F_CONTENTLENGTH) && hp->content_length);
    int too_big = (hp->flags & F_CONTENTLENGTH) && hp->content_length > p->max_body;
    if (too_big)
        set_reject(r, 413, PX_BODY_TOO_LARGE, TD_OUT_BAD_REQUEST);
    /* Answer now and close rather than read a body we will not use when
     * it is too big, or when the client waits for 100 Continue. */
    if (r->reject_status && has_body && (too_big || r->expect_continue)) {
        r->keep_alive = 0;
        px_respond(c, r->reject_status, r->reject_extra, r->reject_error);
        px_req_end(c, r->reject_outcome);
        c->stop = 1;
        return;
    }
    if (!r->reject_status && has_body && r->expect_continue && r->http_minor >= 1)
        td__buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
}

/* GET /v1/models, answered by tenantd for the tenant and key. */
static void answer_models(px_conn *c)
{
    px_req *r = &c->rq;
    char *list = NULL;
    size_t n = 0;
    if (td_gw_models_list(r->cfg->c, r->tenant, r->key, &list, &n) != TD_OK) {
        respond_shed(c, "overload");
        px_req_end(c, TD_OUT_SHED);
        return;
    }
    px_respond(c, 200, NULL, list);
    free(list);
    px_req_end(c, TD_OUT_ACCEPTED);
}

/* Counts the limits that refused or in shadow would have (v->events, the
 * shadow budgets) and keeps the noted ones for `tenantctl explain`. */
static void count_limits(px_conn *c, const td_gw_verdict *v)
{
    px_req *r = &c->rq;
    td_metrics *m = c->w->p->metrics;
    for (size_t i = 0; i < v->nevents; i++) {
        const td_gw_limit_event *e = &v->events[i];
        td_metrics_limit_rejection(m, r->tenant->slot, e->limit, e->shadow);
        if (e->noted)
            note_refusal(c, 429, e->reason, true, e->key, NULL);
    }
    for (size_t i = 0; i < v->budget.nshadow; i++)
        note_shadow_budget(c, &v->budget.shadow[i]);
}

/* Writes the refusal v decided (now_s: the budgets' clock). */
static void respond_refusal(px_conn *c, const td_gw_verdict *v, int64_t now_s)
{
    px_req *r = &c->rq;
    switch (v->form) {
    case TD_GW_FORM_ERROR:
        if (v->detail[0])
            note_refusal(c, (uint16_t)v->status, v->reason, false, r->key, v->detail);
        respond_error(c, v->status, v->code, v->message, v->param, v->fields[0] ? v->fields : NULL,
                      v->header);
        break;
    case TD_GW_FORM_METHOD:
        snprintf(r->allow_hdr, sizeof r->allow_hdr, "Allow: %s\r\n", v->route->allow);
        px_respond(c, 405, r->allow_hdr, METHOD_BODY);
        break;
    case TD_GW_FORM_LIMITED:
        if (v->level == TD_GW_LEVEL_MODEL)
            respond_model_limited(c, v->reason, v->retry_after_ns, v->model_limit);
        else
            respond_limited(c, v->reason, v->retry_after_ns,
                            v->level == TD_GW_LEVEL_KEY ? r->key : NULL);
        break;
    case TD_GW_FORM_BUDGET:
        respond_budget(c, v->budget.refused.budget, v->budget.refused.key,
                       v->budget.refused.model, v->budget.refused.spent_nano, now_s);
        break;
    }
}

/* (f) the route's criticality queue, this worker's share of it: start,
 * wait, or shed. */
static void enqueue(px_conn *c, uint64_t timeout_ns, uint64_t now)
{
    px_req *r = &c->rq;
    px_worker *w = c->w;
    const td_gw_tenant *t = r->tenant;
    r->t_decided = now;
    r->rs = px_route_get(w, r->cfg->c, r->route);
    if (!r->rs) {
        r->actual = 0;
        respond_shed(c, "overload");
        px_req_end(c, TD_OUT_SHED);
        return;
    }
    r->deadline_ns = now + timeout_ns;
    td_cq_item it = {c, r->crit, t->slot, t->weight, r->deadline_ns, 0};
    td_cq_item evicted;
    bool had_eviction = false;
    switch (td_critqueue_offer(r->rs->q, &it, now, &evicted, &had_eviction)) {
    case TD_CQ_START:
        r->cq_started = 1;
        r->t_started = now;
        px_forward(c);
        break;
    case TD_CQ_QUEUED:
        r->queued = 1;
        r->state = RQ_QUEUED;
        td_metrics_queue_add(w->p->metrics, r->route->slot, r->crit, 1);
        px_timer_set(c, TM_QUEUE, (r->deadline_ns - now + 999999) / 1000000);
        if (had_eviction && evicted.req && evicted.req != c)
            shed_evicted(evicted.req);
        break;
    case TD_CQ_SHED:
        r->actual = 0;
        respond_shed(c, "overload");
        px_req_end(c, TD_OUT_SHED);
        break;
    case TD_CQ_DEADLINE:
        r->actual = 0;
        respond_shed(c, "deadline");
        px_req_end(c, TD_OUT_SHED);
        break;
    }
}

/* Replaces a gzip body by its inflation, bounded by the maximum body size
 * (--max-body): 0; or -1, the request answered (413 past the bound, 400 a
 * corrupt stream, 503 out of memory) and ended. */
static int inflate_body(px_conn *c)
{
    px_req *r = &c->rq;
    char *out = NULL;
    size_t n = 0;
    td_err err;
    td_status st = td_gunzip(r->body.p, r->body.len, c->w->p->max_body, &out, &n, &err);
    if (st == TD_OK) {
        td__buf_clear(&r->body, 0);
        st = td__buf_append(&r->body, out, n);
        free(out);
    }
    if (st == TD_OK) {
        r->body_inflated = 1;
        return 0;
    }
    if (st == TD_EQUOTA) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "the gzip request body inflates to more than the gateway accepts (%zu bytes)",
                 c->w->p->max_body);
        respond_error(c, 413, "body_too_large", msg, NULL, NULL, NULL);
    } else if (st == TD_EINVAL) {
        respond_error(c, 400, "bad_request", err.msg, NULL, ",\"reason\":\"bad_gzip\"", NULL);
    } else {
        respond_shed(c, "overload");
        px_req_end(c, TD_OUT_SHED);
        return -1;
    }
    px_req_end(c, TD_OUT_BAD_REQUEST);
    return -1;
}

/* The whole request is here: a refusal decided at the headers is
 * answered; otherwise the gateway decides (td_gw_decide) and the request
 * is refused, or queued and forwarded. */
void px_req_message(px_conn *c)
{
    px_req *r = &c->rq;
    td_proxy *p = c->w->p;
    if (r->reject_status) {
        px_respond(c, r->reject_status, r->reject_extra, r->reject_error);
        px_req_end(c, r->reject_outcome);
        return;
    }
    if (r->models_list) {
        answer_models(c);
        return;
    }
    if (r->preflight) {
        char hdrs[TD_GW_CORS_HEADERS_MAX];
        td_gw_cors_preflight(r->cors, r->h_origin, req_header(r, "access-control-request-method"),
                             req_header(r, "access-control-request-headers"), hdrs, sizeof hdrs);
        px_respond(c, 204, hdrs, "");
        px_req_end(c, TD_OUT_ACCEPTED);
        return;
    }
    if (r->body_gzip && inflate_body(c) != 0)
        return;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    uint64_t now = px_now();
    /* the path NUL-terminated for the route by model (the query follows) */
    char *end = r->url.p + r->path_off + r->path_len;
    char saved = *end;
    *end = '\0';
    td_gw_request rq = {r->cfg->c,
                        r->tenant,
                        r->key,
                        r->route,
                        r->route_by_model,
                        http_method_str((enum http_method)r->method),
                        r->url.p + r->path_off,
                        r->body.p,
                        r->body.len,
                        r->h_crit,
                        r->h_timeout,
                        r->h_gpu,
                        now,
                        (int64_t)wall.tv_sec,
                        r->model,
                        sizeof r->model};
    td_gw_verdict v;
    td_gw_decide(p->g, &rq, &r->bud, &v);
    *end = saved;
    r->route = v.route;
    if (v.route)
        r->cors = v.route->cors; /* routed by model: that route's policy */
    r->estimate = v.estimate;
    r->actual = v.refund ? 0 : v.estimate;
    r->prompt_est = v.prompt_tokens;
    r->reserve_tokens = r->covered_tokens = v.reserve_tokens;
    r->crit = v.crit;
    r->shadow = v.shadow;
    r->ch = v.charged;
    if (r->ch.conc_held)
        td_metrics_inflight_add(p->metrics, r->tenant->slot, 1);
    count_limits(c, &v);
    if (v.status) {
        respond_refusal(c, &v, (int64_t)wall.tv_sec);
        /* for the flood defence (proxy.c, flood_check) */
        if (v.form == TD_GW_FORM_LIMITED && v.retry_after_ns != TD_LIMITER_NEVER)
            c->refusal_retry_ns = v.retry_after_ns ? v.retry_after_ns : 1;
        px_req_end(c, v.outcome);
        return;
    }
    enqueue(c, v.timeout_ns, now);
}
