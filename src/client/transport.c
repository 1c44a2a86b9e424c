/* transport.c - the blocking transport of the well-behaved client: one
 * logical request through td_client's policy over td_http_request_do, for
 * simple C programs. The event-loop transport lives in tenantctl loadtest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenantd/client.h"

static uint64_t mono_now(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void mono_sleep(void *ctx, uint64_t ns)
{
    (void)ctx;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Finds "key": followed by a whole number in body; -1 if absent. The body
 * is the gateway's own small JSON, so a scan does; a full parse would cost
 * a dependency's allocation on every rejection. */
static long long json_number(const char *body, size_t len, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < len; i++) {
        if (body[i] != '"' || memcmp(body + i + 1, key, kl) != 0 || body[i + 1 + kl] != '"')
            continue;
        size_t j = i + kl + 2;
        while (j < len && (body[j] == ' ' || body[j] == ':'))
            j++;
        long long v = 0;
        size_t start = j;
        while (j < len && body[j] >= '0' && body[j] <= '9' && v < 1000000000000ll)
            v = v * 10 + (body[j++] - '0');
        return j > start ? v : -1;
    }
    return -1;
}

static bool contains(const char *body, size_t len, const char *needle)
{
    size_t nl = strlen(needle);
    for (size_t i = 0; body && i + nl <= len; i++)
        if (memcmp(body + i, needle, nl) == 0)
            return true;
    return false;
}

uint64_t td_client_parse_retry_after(int status, const char *retry_after_hdr, const char *body,
                                     size_t body_len)
{
    if (body) {
        long long ms = json_number(body, body_len, "retry_after_ms");
        /* a budget that resets more than a minute away: tenantd says
         * x-should-retry: false, and so does the body's code */
        if (status == 429 && ms > 60000 && contains(body, body_len, "\"budget_exceeded\""))
            return TD_CLIENT_NEVER;
        if (ms >= 0)
            return (uint64_t)ms * 1000000ull;
    }
    if (retry_after_hdr) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(retry_after_hdr, &end, 10);
        if (end != retry_after_hdr && *end == '\0' && !errno && s < 86400ull * 365)
            return s * 1000000000ull;
    }
    if (status == 429 && contains(body, body_len, "cost_exceeds_burst"))
        return TD_CLIENT_NEVER;
    return 0;
}

td_status td_client_do(td_client *c, const char *url, const char *method, const char *content_type,
                       const char *body, size_t body_len, const td_http_client_opts *http,
                       uint64_t timeout_ms, const td_client_clock *clock, td_client_result *res,
                       td_err *err)
{
    if (!c || !url || !method || !res || (body_len && !body))
        return td_err_set(err, TD_EINVAL, "td_client_do: missing argument");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return td_err_set(err, TD_EINVAL, "td_client_do: %s: want an http:// or https:// URL", url);
    uint64_t (*now)(void *) = clock && clock->now_ns ? clock->now_ns : mono_now;
    void (*sleep_ns)(void *, uint64_t) = clock && clock->sleep_ns ? clock->sleep_ns : mono_sleep;
    void *ctx = clock ? clock->ctx : NULL;

    td_http_client_opts ho;
    if (http)
        ho = *http;
    else
        memset(&ho, 0, sizeof ho);
    int per_attempt_ms = ho.timeout_ms > 0 ? ho.timeout_ms : 30000;

    memset(res, 0, sizeof *res);
    uint64_t t = now(ctx);
    td_client_call call;
    td_client_call_begin(c, &call, t, timeout_ms ? t + timeout_ms * 1000000ull : 0);
    for (;;) {
        td_client_decision d = td_client_should_send(c, &call, now(ctx));
        if (d != TD_CLIENT_SEND) {
            res->decision = d;
            break;
        }
        ho.timeout_ms = per_attempt_ms;
        if (call.deadline_ns) {
            uint64_t n = now(ctx);
            uint64_t left_ms = n < call.deadline_ns ? (call.deadline_ns - n + 999999) / 1000000 : 1;
            if (left_ms < (uint64_t)ho.timeout_ms)
                ho.timeout_ms = (int)left_ms;
        }
        int status = 0;
        char *rb = NULL;
        size_t rl = 0;
        td_err e;
        td_status st = td_http_request_do(url, method, content_type, body, body_len, &ho, &status,
                                          &rb, &rl, &e);
        res->attempts = call.attempts;
        if (st == TD_EINVAL || st == TD_ENOMEM) {
            free(res->body);
            res->body = NULL;
            return td_err_set(err, st, "%s", e.msg);
        }
        if (st == TD_EAGAIN)
            status = TD_CLIENT_ETIMEOUT;
        else if (st != TD_OK)
            status = TD_CLIENT_ECONNECT;
        uint64_t ra = st == TD_OK ? td_client_parse_retry_after(status, NULL, rb, rl) : 0;
        if (st == TD_OK && status == 503 && ra == 0)
            ra = 1000000000ull; /* tenantd sheds with Retry-After: 1 */
        free(res->body);
        res->body = rb;
        res->body_len = rl;
        res->status = status;
        uint64_t wait = 0;
        d = td_client_on_result(c, &call, now(ctx), status, ra, &wait);
        if (d != TD_CLIENT_RETRY) {
            res->decision = d;
            break;
        }
        sleep_ns(ctx, wait);
    }
    return TD_OK;
}
