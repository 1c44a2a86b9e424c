/* client.h - a well-behaved client of tenantd's gateway: adaptive throttling
 * (SRE book, "Handling Overload"), retry budgets per request and per client
 * (gRPC retry throttling), and bounded exponential backoff with full jitter
 * that honours Retry-After and the request's deadline.
 *
 * The policy is a pure decision core: time comes in as now_ns and
 * randomness from a seeded generator (or the caller's), so a blocking
 * transport (td_client_do), an event-loop transport (tenantctl loadtest) and
 * the unit tests share it. A caller drives one logical request like this:
 *
 *     td_client_call call;
 *     td_client_call_begin(c, &call, now, deadline);
 *     for (;;) {
 *         if (td_client_should_send(c, &call, now) != TD_CLIENT_SEND) break;  // dropped/deadline
 *         status = send the attempt ...;
 *         d = td_client_on_result(c, &call, now, status, retry_after_ns, &wait_ns);
 *         if (d != TD_CLIENT_RETRY) break;                                      // final
 *         sleep wait_ns;
 *     }
 *
 * A td_client is safe to share between threads (each call takes its lock). */
#ifndef TENANTD_CLIENT_H
#define TENANTD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/http.h"
#include "tenantd/status.h"

/* Transport outcomes passed as `status` to td_client_on_result besides HTTP
 * statuses: the connection could not be made or was reset (retryable), or
 * the attempt timed out (not retried: the deadline is what bounds it). */
#define TD_CLIENT_ECONNECT (-1)
#define TD_CLIENT_ETIMEOUT (-2)

/* retry_after_ns value meaning "the server says waiting will not help"
 * (a 429 without Retry-After, e.g. cost_exceeds_burst): never retried. */
#define TD_CLIENT_NEVER UINT64_MAX

typedef struct {
    /* Adaptive throttling. k: accepts multiplier K (default 2; larger is
     * less aggressive). window_ns: sliding window of the request, accept
     * and retry counts (default 120 s), kept in window_buckets buckets
     * (default 120). no_throttle = true turns local dropping off.
     * padding is subtracted from requests in the numerator, as grpc-go's
     * adaptive throttler does (requestsPadding = 8), so that a client with
     * its first requests still in flight (counted, not yet accepted) does
     * not drop: 0 means the default 8, a negative value no padding (the
     * SRE book's formula exactly). */
    double k;
    uint64_t window_ns;
    uint32_t window_buckets;
    bool no_throttle;
    int32_t padding;
    /* Retry budgets. max_attempts per logical request, first one included
     * (default 3; 1 = never retry). retry_ratio: retries allowed per
     * logical request over the window (default 0.1). retry_min: retries
     * allowed per window regardless of the ratio (default 0). */
    uint32_t max_attempts;
    double retry_ratio;
    uint32_t retry_min;
    /* Backoff: before retry n (0-based), wait uniform in
     * [0, min(backoff_cap_ns, backoff_base_ns * 2^n)] (defaults 100 ms and
     * 10 s), and at least the server's Retry-After. */
    uint64_t backoff_base_ns;
    uint64_t backoff_cap_ns;
    /* Randomness: rand01 returns a uniform double in [0, 1) (borrowed with
     * rand_ctx); NULL uses an internal generator seeded with seed (0: a
     * fixed default seed, so runs are reproducible unless told otherwise). */
    double (*rand01)(void *rand_ctx);
    void *rand_ctx;
    uint64_t seed;
} td_client_opts;

/* Sets every field of o to its default. A zeroed td_client_opts also means
 * "defaults" field by field, so callers may set only what they change. */
void td_client_opts_default(td_client_opts *o);

typedef struct td_client td_client;

/* Creates a client with opts (copied; NULL: defaults). TD_EINVAL if an
 * option is out of range (k < 1 or not finite, retry_ratio < 0 or > 1,
 * window_buckets > 3600, base > cap), naming it; TD_ENOMEM. */
td_status td_client_create(const td_client_opts *opts, td_client **out, td_err *err);

/* Frees c; NULL is a no-op. */
void td_client_destroy(td_client *c);

/* Counters since creation. sent: attempts put on the wire; accepted:
 * attempts the server did not reject for overload (any status but 429 and
 * 5xx, and no transport error); dropped: attempts refused locally by
 * adaptive throttling; retried: retries granted; budget_exhausted: retries
 * refused by the per-client budget; attempts_exhausted: retries refused
 * because the request had used max_attempts; deadline_exceeded: requests
 * given up because the next attempt could not start before the deadline. */
typedef struct {
    uint64_t sent;
    uint64_t accepted;
    uint64_t dropped;
    uint64_t retried;
    uint64_t budget_exhausted;
    uint64_t attempts_exhausted;
    uint64_t deadline_exceeded;
} td_client_counters;

void td_client_get_counters(td_client *c, td_client_counters *out);

/* One logical request: caller-provided storage, no cleanup needed. */
typedef struct {
    uint64_t deadline_ns; /* absolute, on the caller's clock; 0: none */
    uint32_t attempts;    /* attempts sent so far */
} td_client_call;

typedef enum {
    TD_CLIENT_SEND = 0,    /* should_send: send the attempt now */
    TD_CLIENT_DONE,        /* on_result: the response is final (success or not retryable) */
    TD_CLIENT_RETRY,       /* on_result: wait *wait_ns, then should_send again */
    TD_CLIENT_DROPPED,     /* should_send: refused locally by adaptive throttling; final */
    TD_CLIENT_NO_ATTEMPTS, /* on_result: retryable, but max_attempts used; final */
    TD_CLIENT_NO_BUDGET,   /* on_result: retryable, but the client's budget is spent; final */
    TD_CLIENT_DEADLINE     /* either: the deadline leaves no room for an attempt; final */
} td_client_decision;

/* A short lower-case name of d ("send", "retry", "dropped", ...). */
const char *td_client_decision_name(td_client_decision d);

/* Starts a logical request at now_ns with an absolute deadline (0: none);
 * counts it for the per-client retry budget. */
void td_client_call_begin(td_client *c, td_client_call *call, uint64_t now_ns,
                          uint64_t deadline_ns);

/* Whether the next attempt of call may go out at now_ns. Counts a request
 * for adaptive throttling, then: TD_CLIENT_DEADLINE if now_ns is at or past
 * the deadline; TD_CLIENT_DROPPED with the probability
 * td_client_drop_probability had just before this call; else
 * TD_CLIENT_SEND, and the attempt is counted as sent. */
td_client_decision td_client_should_send(td_client *c, td_client_call *call, uint64_t now_ns);

/* Reports the outcome of the attempt just sent: status is the HTTP status
 * or TD_CLIENT_ECONNECT / TD_CLIENT_ETIMEOUT; retry_after_ns is the wait
 * the server asked for (0: none; TD_CLIENT_NEVER: waiting will not help).
 * Retryable outcomes are 429 and 503 (unless TD_CLIENT_NEVER) and
 * TD_CLIENT_ECONNECT; anything else is TD_CLIENT_DONE. A retryable outcome
 * gives, in this order: TD_CLIENT_NO_ATTEMPTS, TD_CLIENT_NO_BUDGET,
 * TD_CLIENT_DEADLINE if now_ns + the wait would pass the deadline, else
 * TD_CLIENT_RETRY with *wait_ns = max(retry_after_ns, jittered backoff).
 * wait_ns may be NULL; it is set to 0 unless the decision is RETRY. */
td_client_decision td_client_on_result(td_client *c, td_client_call *call, uint64_t now_ns,
                                       int status, uint64_t retry_after_ns, uint64_t *wait_ns);

/* The adaptive-throttling drop probability at now_ns:
 * max(0, (requests - k * accepts - padding) / (requests + 1)) over the
 * window. */
double td_client_drop_probability(td_client *c, uint64_t now_ns);

/* Counts over the window at now_ns (any pointer may be NULL): attempts
 * offered to should_send, attempts accepted, logical requests begun, and
 * retries granted. */
void td_client_window(td_client *c, uint64_t now_ns, uint64_t *requests, uint64_t *accepts,
                      uint64_t *calls, uint64_t *retries);

/* ---- blocking transport ---- */

/* The outcome of td_client_do. */
typedef struct {
    td_client_decision decision; /* DONE, DROPPED, NO_ATTEMPTS, NO_BUDGET or DEADLINE */
    int status;        /* last HTTP status, or TD_CLIENT_ECONNECT/ETIMEOUT; 0 if never sent */
    uint32_t attempts; /* attempts sent */
    char *body;        /* last response body (malloc'd, NUL-terminated; caller frees); or NULL */
    size_t body_len;
} td_client_result;

/* Clock and sleep for td_client_do; NULL members use CLOCK_MONOTONIC and
 * nanosleep. Tests pass a fake pair. */
typedef struct {
    uint64_t (*now_ns)(void *ctx);
    void (*sleep_ns)(void *ctx, uint64_t ns);
    void *ctx;
} td_client_clock;

/* Sends a request through c's policy with td_http_request_do, retrying as
 * the policy decides, for at most timeout_ms in all (0: no deadline; each
 * attempt is bounded by what is left, else by http->timeout_ms). url,
 * method, content_type, body and http are as for td_http_request_do and
 * borrowed for the call; clock may be NULL. The Retry-After of a 429 is
 * read from the gateway's JSON body (retry_after_ms); a 503 waits at least
 * 1 s, the Retry-After tenantd sends when it sheds.
 * TD_OK with *res filled whatever the HTTP outcome (res->decision says how
 * it ended; the caller frees res->body); TD_EINVAL for a bad URL or
 * argument (nothing sent); TD_ENOMEM. */
td_status td_client_do(td_client *c, const char *url, const char *method, const char *content_type,
                       const char *body, size_t body_len, const td_http_client_opts *http,
                       uint64_t timeout_ms, const td_client_clock *clock, td_client_result *res,
                       td_err *err);

/* Parses the wait a gateway response asks for: the JSON body's
 * "retry_after_ms" if present, else the Retry-After header value
 * retry_after_hdr (delta-seconds; may be NULL); for a 429 whose body says
 * "cost_exceeds_burst", or "budget_exceeded" with more than a minute to
 * wait (waiting cannot help), TD_CLIENT_NEVER; else 0. The body's
 * retry_after_ms is found inside tenantd's OpenAI-shaped error too. */
uint64_t td_client_parse_retry_after(int status, const char *retry_after_hdr, const char *body,
                                     size_t body_len);

#endif
