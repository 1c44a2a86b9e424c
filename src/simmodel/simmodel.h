/* simmodel.h - the parts of simmodel, a simulated OpenAI-compatible
 * inference server that stands upstream of tenantd in tests, the demo and
 * the benchmarks. gpu.c is the slot pool and its FIFO queue, request.c
 * turns request bodies into token counts and writes response JSON (both
 * pure), server.c is the HTTP/1.1 server on a libuv loop, main.c the flags. */
#ifndef TENANTD_SIMMODEL_H
#define TENANTD_SIMMODEL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "tenantd/status.h"

/* ---- configuration (main.c fills it from the flags) ---- */

typedef struct {
    const char *listen;          /* "ADDR:PORT" or "[V6ADDR]:PORT"; port 0 = any */
    unsigned slots;              /* concurrent requests the GPU serves, >= 1 */
    double ms_per_token;         /* decode time per output token */
    double prefill_ms_per_token; /* prefill time per prompt token */
    size_t max_queue;            /* requests that may wait for a slot */
    unsigned default_max_tokens; /* output tokens when the request names none */
} td_sim_config;

/* ---- gpu.c: slots and the queue in front of them ---- */

typedef enum { TD_SIM_JOB_IDLE = 0, TD_SIM_JOB_QUEUED, TD_SIM_JOB_RUNNING } td_sim_job_state;

typedef struct td_sim_job td_sim_job;
struct td_sim_job {
    td_sim_job *prev, *next; /* queue links while QUEUED */
    td_sim_job_state state;
    /* Called when the job leaves the queue for a slot, from inside
     * td_sim_gpu_release. It must not submit or release jobs itself. */
    void (*on_start)(td_sim_job *job);
};

typedef struct {
    unsigned slots, busy;
    size_t queued, max_queue;
    td_sim_job *head, *tail;
} td_sim_gpu;

void td_sim_gpu_init(td_sim_gpu *g, unsigned slots, size_t max_queue);

/* Offers an IDLE job to the GPU. TD_OK with job->state RUNNING when a slot
 * was free and nobody waits (on_start is not called: the caller starts it),
 * or QUEUED at the tail of the queue. TD_EAGAIN when the queue already
 * holds max_queue jobs; nothing changes. Borrows job until it is released. */
td_status td_sim_gpu_submit(td_sim_gpu *g, td_sim_job *job);

/* Ends job, finished or abandoned: a RUNNING job frees its slot, which goes
 * to the head of the queue (its on_start runs); a QUEUED job leaves the
 * queue. job is IDLE afterwards; releasing an IDLE job does nothing. */
void td_sim_gpu_release(td_sim_gpu *g, td_sim_job *job);

/* ---- request.c: what a request costs, and the JSON that answers it ---- */

typedef enum { TD_SIM_CHAT = 0, TD_SIM_COMPLETION, TD_SIM_EMBEDDING } td_sim_kind;

#define TD_SIM_MAX_OUTPUT_TOKENS (1u << 20)
#define TD_SIM_MODEL_MAX         256

typedef struct {
    td_sim_kind kind;
    char model[TD_SIM_MODEL_MAX]; /* the request's "model", or "simmodel" */
    uint64_t prompt_tokens;       /* ceil(characters of the prompt text / 4) */
    unsigned output_tokens;       /* max_tokens, the default, or 0 for embeddings */
    unsigned n_inputs;            /* embeddings: vectors to return */
    int stream;                   /* "stream": true (not for embeddings) */
    int base64; /* embeddings: "encoding_format": "base64" (little-endian float32) */
} td_sim_request;

/* Reads an OpenAI request body of the given kind. Prompt text is
 * messages[].content (strings, or arrays of {"text": ...} parts) for chat,
 * "prompt" (a string, array of strings, or token arrays) for completions
 * (each takes the other's field when its own is missing), "input" (a
 * string, array of strings, or token arrays) for embeddings; characters
 * are Unicode code points; an embedding's "encoding_format" is "float"
 * (the default) or "base64". TD_EINVAL with a message fit for an OpenAI
 * error body when the JSON or a field is bad. Borrows body. */
td_status td_sim_request_parse(td_sim_kind kind, const char *body, size_t len,
                               unsigned default_max_tokens, td_sim_request *out, td_err *err);

/* Slot time of r in milliseconds: prefill plus decode, doubled when slow. */
double td_sim_service_ms(const td_sim_config *cfg, const td_sim_request *r, int slow);

/* Identity of one response, shared by all its stream chunks. */
typedef struct {
    uint64_t id;     /* printed as "cmpl-<id>" */
    int64_t created; /* unix seconds */
    double gpu_seconds;
} td_sim_reply;

/* The non-streaming response body, a malloc'd NUL-terminated JSON string
 * (NULL when out of memory). */
char *td_sim_response_json(const td_sim_request *r, const td_sim_reply *y);

/* Stream chunk for output token index (0-based), or, with index equal to
 * r->output_tokens, the final chunk carrying usage and gpu_seconds.
 * malloc'd JSON, NULL when out of memory. */
char *td_sim_chunk_json(const td_sim_request *r, const td_sim_reply *y, unsigned index);

/* An OpenAI error body {"error": {"message", "type", ...}}, malloc'd. */
char *td_sim_error_json(const char *message, const char *type);

/* ---- server.c: HTTP on a libuv loop ---- */

typedef struct td_sim_server td_sim_server;

/* Binds cfg->listen and starts serving on loop. Copies cfg (listen is only
 * read here). TD_EINVAL for a bad address, TD_EIO when it cannot bind. */
td_status td_sim_server_create(uv_loop_t *loop, const td_sim_config *cfg, td_sim_server **out,
                               td_err *err);

/* The bound TCP port. */
int td_sim_server_port(const td_sim_server *s);

/* Stops listening and closes every connection, abandoning their requests.
 * The handles finish closing as the loop runs on; call it once. */
void td_sim_server_stop(td_sim_server *s);

/* Frees s once the loop has run dry after td_sim_server_stop. NULL is a no-op. */
void td_sim_server_destroy(td_sim_server *s);

#endif
