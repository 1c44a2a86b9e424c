/* estimate.h - what one gateway request costs in its route's units: an estimate
 * at entry from the request body (tokens), a header (GPU-seconds) or a
 * constant (requests), and the actual cost from the upstream's response,
 * found by a scanner fed the response body chunk by chunk in constant
 * memory. Pure: no sockets, clocks or allocation after a call returns. */
#ifndef TENANTD_ESTIMATE_H
#define TENANTD_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/gateway.h"
#include "tenantd/status.h"

/* Completion tokens assumed when a request names no max_tokens: the
 * estimate the rate limits charge at entry (reconciled after the answer). */
#define TD_COST_DEFAULT_MAX_TOKENS 16

/* Completion tokens a request naming no max_tokens reserves of its budgets
 * on a route without spec.cost.maxOutputTokens: 4096, the output cap of
 * gpt-3.5-turbo and gpt-4-turbo, room for an ordinary chat answer. A
 * budget is money, not repaid over time as a rate limit is, so the
 * reservation has to bound what one request can spend; a route serving
 * longer answers sets its own (docs/security.md). */
#define TD_COST_DEFAULT_MAX_OUTPUT_TOKENS 4096

/* Estimates the cost of a request on a route of model m.
 * - tokens: ceil(prompt characters / 4) + max_tokens (or
 *   max_completion_tokens; TD_COST_DEFAULT_MAX_TOKENS if neither, 0 for an
 *   embeddings body, i.e. one with "input" and neither "messages" nor
 *   "prompt"), times "n" when n > 1. Prompt characters are Unicode code
 *   points of messages[].content (a string, or an array of parts whose
 *   "text" strings count), of "prompt" (a string or array of strings; an
 *   array of integer token ids counts each id as one token) and of "input"
 *   (the same shapes). The body must be a JSON object; anything else, or a
 *   max_tokens that is not a non-negative integer, is TD_EINVAL with a
 *   message fit for a 400 answer.
 * - gpuSeconds: gpu_seconds_header (the request's X-GPU-Seconds-Estimate,
 *   NULL if absent) when given, else default_gpu_seconds. A header that is
 *   not a finite number >= 0 is TD_EINVAL.
 * - requests: 1.
 * body is borrowed (need not be NUL-terminated); *out is set only on TD_OK. */
td_status td_cost_estimate(td_cost_model m, const char *body, size_t len,
                           const char *gpu_seconds_header, double default_gpu_seconds, double *out,
                           td_err *err);

/* The same, and *prompt_out (may be NULL) the prompt's part of a tokens
 * estimate (ceil(characters / 4) + token ids, before max_tokens; 0 for the
 * other models). */
td_status td_cost_estimate_ex(td_cost_model m, const char *body, size_t len,
                              const char *gpu_seconds_header, double default_gpu_seconds,
                              double *out, double *prompt_out, td_err *err);

/* What a request body bounds: the estimate of td_cost_estimate_ex and the
 * parts a budget reservation needs. */
typedef struct {
    double estimate;   /* as td_cost_estimate */
    double prompt;     /* the estimate's prompt tokens (0 for the other models) */
    double choices;    /* "n", at least 1 */
    bool output_named; /* max_tokens or max_completion_tokens given (or an
                        * embeddings body, which has no output) */
} td_cost_request;

/* td_cost_estimate_ex's work, keeping the parts: *out is set only on TD_OK,
 * the errors are td_cost_estimate's. */
td_status td_cost_inspect(td_cost_model m, const char *body, size_t len,
                          const char *gpu_seconds_header, double default_gpu_seconds,
                          td_cost_request *out, td_err *err);

/* Tokens a tokens-route request reserves of its budgets: its estimate when
 * the body bounds its output, else its prompt plus max_output_tokens (the
 * Route's spec.cost.maxOutputTokens; 0: TD_COST_DEFAULT_MAX_OUTPUT_TOKENS)
 * per choice. Other models reserve their estimate. */
double td_cost_reserve_tokens(td_cost_model m, const td_cost_request *q,
                              uint32_t max_output_tokens);

/* What a response said it used. Fields are valid when their TD_USAGE_ bit
 * is set in have. */
enum {
    TD_USAGE_TOTAL = 1u,
    TD_USAGE_PROMPT = 2u,
    TD_USAGE_COMPLETION = 4u,
    TD_USAGE_GPU_SECONDS = 8u,
    TD_USAGE_CONTENT = 16u /* scanner only: content_chars counted */
};
typedef struct {
    unsigned have;
    double total_tokens, prompt_tokens, completion_tokens, gpu_seconds;
    /* Characters (code points) of the generated text: the "content" and
     * "text" strings below the top two levels (choices[].delta.content,
     * choices[].message.content, choices[].text), summed over every event
     * of a stream. For a response that reports no usage. */
    double content_chars;
} td_usage;

/* Reads the top-level "usage" object ({total_tokens, prompt_tokens,
 * completion_tokens}) and a "gpu_seconds" number (top level or inside
 * usage) of a whole JSON response with jansson. TD_OK (u->have may still be
 * 0 when the body names no usage); TD_EINVAL if the body is not JSON. */
td_status td_cost_usage_json(const char *body, size_t len, td_usage *u);

/* ---- the incremental scanner ---- */

/* Private; here so that callers can embed the scanner (no allocation). */
typedef struct {
    unsigned char sse; /* body is text/event-stream */
    /* SSE line state */
    unsigned char line_state, prefix_pos, skip_lf, event_has_data;
    unsigned char event_open; /* a line of the current event has ended */
    /* JSON state of the current document (the body, or one event's data) */
    unsigned char in_string, escape, in_scalar, broken;
    uint32_t depth;
    unsigned char obj1, obj2; /* the containers at depth 1 and 2 are objects */
    unsigned char want_key1, want_key2;
    unsigned char key_collect; /* the string being read is a key at depth 1 or 2 */
    unsigned char in_usage;    /* the depth-2 container is the top-level "usage" */
    unsigned char usage_done;  /* that usage object closed in this document */
    unsigned char key1_len, key2_len, key1_over, key2_over;
    char key1[24], key2[24];
    /* strings below depth 2: is the last one the key "content"/"text", is
     * the current one its value (counted), \uXXXX digits still to skip */
    unsigned char deep_collect, deep_len, deep_over, deep_last_content, deep_after_colon,
        deep_counting, u_skip;
    char deep[8];
    unsigned char num_len, num_over;
    char num[40];
    td_usage pending; /* values read inside the usage object being scanned */
    td_usage found;   /* the last complete usage (and gpu_seconds) seen */
} td_cost_scanner;

/* Prepares s for a response body; sse when its Content-Type is
 * text/event-stream (each `data:` event is then its own JSON document and
 * the last usage wins), otherwise the body is one JSON document. */
void td_cost_scanner_init(td_cost_scanner *s, bool sse);

/* Feeds the next n bytes of the (de-chunked) body. Any split is fine:
 * events, lines, keys and numbers may be cut at any byte. Never fails:
 * what is not JSON is skipped. */
void td_cost_scanner_feed(td_cost_scanner *s, const char *p, size_t n);

/* Ends the body (a last event without its blank line still counts) and
 * returns what was found; u->have is 0 if nothing. */
void td_cost_scanner_finish(td_cost_scanner *s, td_usage *u);

/* The actual cost on a route of model m once the response is complete:
 * tokens: u's total_tokens, else prompt + completion; gpuSeconds: the
 * response's X-GPU-Seconds header (gpu_seconds_header, NULL if absent),
 * else u's gpu_seconds; requests: 1. When the response says nothing
 * usable, the estimate stands: *actual = estimate and false is returned. */
bool td_cost_actual(td_cost_model m, const td_usage *u, const char *gpu_seconds_header,
                    double estimate, double *actual);

/* The tokens charged for a tokens-route request whose response did not
 * reach its end (the client closed, the upstream closed or went silent
 * mid-body, tenantd cut the stream for the budget) after it was sent
 * upstream. seen is what the scanner found in the body forwarded so far
 * (NULL: nothing scanned). A usage the upstream reported stands as it is
 * (the upstream finished). Otherwise the tokens are counted, the prompt as
 * estimated (prompt_est) and the completion from the text forwarded
 * (characters / 4), and the charge is at least reserve_tokens, what the
 * request reserved: closing early is never cheaper than the reservation,
 * since what the upstream generated past the last byte forwarded cannot be
 * seen. *tokens_in and *tokens_out split the charge for the ledger. */
void td_cost_settle_cut(const td_usage *seen, double prompt_est, double reserve_tokens,
                        double *tokens_in, double *tokens_out);

/* An SSE body fed so far ends between events (nothing fed yet, or a blank
 * line last): an event may be added there without merging into another.
 * A non-SSE body: always true. */
bool td_cost_scanner_at_event_end(const td_cost_scanner *s);

/* Feeds p byte by byte up to the end of the event in progress and returns
 * the bytes fed: 0 when s is already between events, n when the event
 * does not end within p. */
size_t td_cost_scanner_feed_to_event_end(td_cost_scanner *s, const char *p, size_t n);

/* Tokens counted so far of a body being scanned: prompt_est plus the
 * completion text seen (characters / 4). For the stream's budget check. */
double td_cost_counted_tokens(const td_cost_scanner *s, double prompt_est);

#endif
