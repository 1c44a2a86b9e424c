/* request.c - what an OpenAI request costs simmodel, and the JSON it
 * answers with. Prompt tokens are estimated the way people do on the back
 * of an envelope, a token per four characters; output tokens are always
 * max_tokens, so a client knows exactly what it will be billed. Pure. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simmodel/simmodel.h"

#define EMBEDDING_DIMS 8

/* Unicode code points in a UTF-8 string of n bytes (jansson has checked it). */
static uint64_t count_chars(const char *s, size_t n)
{
    uint64_t chars = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            chars++;
    return chars;
}

static uint64_t tokens_of_chars(uint64_t chars)
{
    return (chars + 3) / 4;
}

/* Characters of one chat message's content: a string, null, or an array of
 * parts of which the {"type": "text", "text": ...} ones count. */
static td_status content_chars(json_t *content, size_t i, uint64_t *chars, td_err *err)
{
    if (!content || json_is_null(content))
        return TD_OK;
    if (json_is_string(content)) {
        *chars += count_chars(json_string_value(content), json_string_length(content));
        return TD_OK;
    }
    if (!json_is_array(content))
        return td_err_set(err, TD_EINVAL,
                          "messages[%zu].content: expected a string or an array of parts", i);
    size_t j;
    json_t *part;
    json_array_foreach(content, j, part)
    {
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || (text && !json_is_string(text)))
            return td_err_set(err, TD_EINVAL, "messages[%zu].content[%zu]: expected a text part", i,
                              j);
        if (text)
            *chars += count_chars(json_string_value(text), json_string_length(text));
    }
    return TD_OK;
}

static td_status chat_prompt(json_t *root, uint64_t *tokens, td_err *err)
{
    json_t *messages = json_object_get(root, "messages");
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return td_err_set(err, TD_EINVAL, "'messages' must be a non-empty array");
    uint64_t chars = 0;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        if (!json_is_object(m))
            return td_err_set(err, TD_EINVAL, "messages[%zu]: expected an object", i);
        td_status st = content_chars(json_object_get(m, "content"), i, &chars, err);
        if (st != TD_OK)
            return st;
    }
    *tokens = tokens_of_chars(chars);
    return TD_OK;
}

/* "prompt" of a completion, or "input" of an embedding: a string, an array
 * of strings, an array of token ids, or an array of arrays of token ids.
 * Token ids count as themselves; *n_inputs is the number of prompts. */
static td_status text_or_tokens(json_t *root, const char *field, uint64_t *tokens,
                                unsigned *n_inputs, td_err *err)
{
    json_t *v = json_object_get(root, field);
    if (json_is_string(v)) {
        *tokens = tokens_of_chars(count_chars(json_string_value(v), json_string_length(v)));
        *n_inputs = 1;
        return TD_OK;
    }
    if (!json_is_array(v) || json_array_size(v) == 0)
        return td_err_set(err, TD_EINVAL,
                          "'%s' must be a string, an array of strings or an array of tokens",
                          field);
    if (json_is_integer(json_array_get(v, 0))) {
        size_t i;
        json_t *t;
        json_array_foreach(v, i, t)
        {
            if (!json_is_integer(t))
                return td_err_set(err, TD_EINVAL, "%s[%zu]: expected a token id", field, i);
        }
        *tokens = json_array_size(v);
        *n_inputs = 1;
        return TD_OK;
    }
    uint64_t total = 0;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (json_is_string(e)) {
            total += tokens_of_chars(count_chars(json_string_value(e), json_string_length(e)));
        } else if (json_is_array(e)) {
            size_t j;
            json_t *t;
            json_array_foreach(e, j, t)
            {
                if (!json_is_integer(t))
                    return td_err_set(err, TD_EINVAL, "%s[%zu][%zu]: expected a token id", field, i,
                                      j);
            }
            total += json_array_size(e);
        } else {
            return td_err_set(err, TD_EINVAL, "%s[%zu]: expected a string or an array of tokens",
                              field, i);
        }
    }
    if (json_array_size(v) > UINT32_MAX)
        return td_err_set(err, TD_EINVAL, "'%s' has too many entries", field);
    *tokens = total;
    *n_inputs = (unsigned)json_array_size(v);
    return TD_OK;
}

/* max_tokens (or, for chat, the newer max_completion_tokens). */
static td_status output_tokens(json_t *root, unsigned dflt, unsigned *out, td_err *err)
{
    const char *field = "max_tokens";
    json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v)) {
        field = "max_completion_tokens";
        v = json_object_get(root, field);
    }
    if (!v || json_is_null(v)) {
        *out = dflt;
        return TD_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)TD_SIM_MAX_OUTPUT_TOKENS)
        return td_err_set(err, TD_EINVAL, "'%s' must be an integer from 0 to %u", field,
                          TD_SIM_MAX_OUTPUT_TOKENS);
    *out = (unsigned)json_integer_value(v);
    return TD_OK;
}

/* An embedding's "encoding_format": absent, null or "float" (JSON numbers),
 * or "base64" (the OpenAI SDKs' default); anything else is refused as the
 * OpenAI API refuses it. */
static td_status encoding_format(json_t *root, int *base64, td_err *err)
{
    json_t *v = json_object_get(root, "encoding_format");
    const char *s = json_string_value(v);
    *base64 = s && strcmp(s, "base64") == 0;
    if (!v || json_is_null(v) || *base64 || (s && strcmp(s, "float") == 0))
        return TD_OK;
    return td_err_set(err, TD_EINVAL, "'encoding_format' must be \"float\" or \"base64\"");
}

td_status td_sim_request_parse(td_sim_kind kind, const char *body, size_t len,
                               unsigned default_max_tokens, td_sim_request *out, td_err *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root)
        return td_err_set(err, TD_EINVAL, "invalid JSON body: %s (line %d, column %d)", jerr.text,
                          jerr.line, jerr.column);
    td_sim_request r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    td_status st = TD_OK;
    if (!json_is_object(root)) {
        st = td_err_set(err, TD_EINVAL, "the body must be a JSON object");
        goto done;
    }

    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model) && !json_is_string(model)) {
        st = td_err_set(err, TD_EINVAL, "'model' must be a string");
        goto done;
    }
    if (json_is_string(model)) {
        /* jansson strings may hold NULs; a model name may not. */
        size_t n = json_string_length(model);
        if (n >= sizeof r.model || strlen(json_string_value(model)) != n) {
            st = td_err_set(err, TD_EINVAL, "'model' must be under %d bytes, without NULs",
                            TD_SIM_MODEL_MAX);
            goto done;
        }
        memcpy(r.model, json_string_value(model), n + 1);
    } else {
        snprintf(r.model, sizeof r.model, "%s", "simmodel");
    }

    json_t *stream = json_object_get(root, "stream");
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        st = td_err_set(err, TD_EINVAL, "'stream' must be a boolean");
        goto done;
    }
    r.stream = json_is_true(stream) && kind != TD_SIM_EMBEDDING;

    /* Chat and completions each take the other's prompt field when their
     * own is missing: test clients send whichever is at hand. */
    int has_messages = json_object_get(root, "messages") != NULL;
    int has_prompt = json_object_get(root, "prompt") != NULL;
    switch (kind) {
    case TD_SIM_CHAT:
    case TD_SIM_COMPLETION:
        r.n_inputs = 1;
        if (has_messages && (kind == TD_SIM_CHAT || !has_prompt))
            st = chat_prompt(root, &r.prompt_tokens, err);
        else if (has_prompt)
            st = text_or_tokens(root, "prompt", &r.prompt_tokens, &r.n_inputs, err);
        else
            st =
                td_err_set(err, TD_EINVAL, "%s",
                           kind == TD_SIM_CHAT ? "'messages' is required" : "'prompt' is required");
        break;
    case TD_SIM_EMBEDDING:
        st = text_or_tokens(root, "input", &r.prompt_tokens, &r.n_inputs, err);
        if (st == TD_OK)
            st = encoding_format(root, &r.base64, err);
        break;
    }
    if (st != TD_OK)
        goto done;
    if (kind == TD_SIM_EMBEDDING)
        r.output_tokens = 0;
    else
        st = output_tokens(root, default_max_tokens, &r.output_tokens, err);
    if (st == TD_OK)
        *out = r;
done:
    json_decref(root);
    return st;
}

double td_sim_service_ms(const td_sim_config *cfg, const td_sim_request *r, int slow)
{
    double ms = (double)r->prompt_tokens * cfg->prefill_ms_per_token +
                (double)r->output_tokens * cfg->ms_per_token;
    return slow ? 2 * ms : ms;
}

/* ---- responses ---- */

/* The words the model "generates", one per token. */
static const char *const WORDS[] = {" The",  " quick", " brown", " fox", " jumps",
                                    " over", " the",   " lazy",  " dog", "."};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

static const char *object_name(const td_sim_request *r, int chunk)
{
    switch (r->kind) {
    case TD_SIM_CHAT:
        return chunk ? "chat.completion.chunk" : "chat.completion";
    case TD_SIM_COMPLETION:
        return "text_completion";
    case TD_SIM_EMBEDDING:
        break;
    }
    return "list";
}

/* json_pack steals every "o" argument, also when it fails, and fails on a
 * NULL one: so a NULL from an inner builder becomes a NULL result. */
static json_t *usage(const td_sim_request *r, const td_sim_reply *y)
{
    return json_pack("{s:I, s:I, s:I, s:f}", "prompt_tokens", (json_int_t)r->prompt_tokens,
                     "completion_tokens", (json_int_t)r->output_tokens, "total_tokens",
                     (json_int_t)(r->prompt_tokens + r->output_tokens), "gpu_seconds",
                     round(y->gpu_seconds * 1e6) / 1e6);
}

/* {"id", "object", "created", "model", key: value, "usage"?}: the frame of
 * every response and chunk. Steals value. */
static char *envelope(const td_sim_request *r, const td_sim_reply *y, int chunk, const char *key,
                      json_t *value, int with_usage)
{
    char id[32];
    snprintf(id, sizeof id, "cmpl-%llu", (unsigned long long)y->id);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", id, "object", object_name(r, chunk),
                          "created", (json_int_t)y->created, "model", r->model, key, value);
    if (o && with_usage && json_object_set_new(o, "usage", usage(r, y)) != 0) {
        json_decref(o);
        o = NULL;
    }
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(o);
    return s;
}

/* Component d of input i's vector: the same numbers in both encodings. */
static double embedding_value(unsigned i, unsigned d)
{
    double x = (double)((i * 7 + d * 13) % 17) / 17.0 - 0.5;
    return round(x * 1e4) / 1e4;
}

/* Input i's vector as OpenAI's "base64" encoding sends it: the float32
 * values, little-endian whatever the host, in standard base64. */
static json_t *embedding_base64(unsigned i)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char raw[EMBEDDING_DIMS * 4];
    for (unsigned d = 0; d < EMBEDDING_DIMS; d++) {
        float f = (float)embedding_value(i, d);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        for (unsigned k = 0; k < 4; k++)
            raw[d * 4 + k] = (unsigned char)(u >> (8 * k));
    }
    char out[(sizeof raw + 2) / 3 * 4 + 1];
    size_t o = 0;
    for (size_t k = 0; k < sizeof raw; k += 3) {
        uint32_t v = (uint32_t)raw[k] << 16;
        if (k + 1 < sizeof raw)
            v |= (uint32_t)raw[k + 1] << 8;
        if (k + 2 < sizeof raw)
            v |= raw[k + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = k + 1 < sizeof raw ? b64[(v >> 6) & 63] : '=';
        out[o++] = k + 2 < sizeof raw ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return json_string(out);
}

static json_t *embeddings(const td_sim_request *r)
{
    json_t *data = json_array();
    for (unsigned i = 0; data && i < r->n_inputs; i++) {
        json_t *vec = r->base64 ? embedding_base64(i) : json_array();
        for (unsigned d = 0; vec && !r->base64 && d < EMBEDDING_DIMS; d++) {
            if (json_array_append_new(vec, json_real(embedding_value(i, d))) != 0) {
                json_decref(vec);
                vec = NULL;
            }
        }
        json_t *e = json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)i,
                              "embedding", vec);
        if (json_array_append_new(data, e) != 0) {
            json_decref(data);
            data = NULL;
        }
    }
    return data;
}

char *td_sim_response_json(const td_sim_request *r, const td_sim_reply *y)
{
    if (r->kind == TD_SIM_EMBEDDING)
        return envelope(r, y, 0, "data", embeddings(r), 1);

    size_t len = 0;
    for (unsigned i = 0; i < r->output_tokens; i++)
        len += strlen(WORDS[i % N_WORDS]);
    char *text = malloc(len + 1);
    if (!text)
        return NULL;
    size_t at = 0;
    for (unsigned i = 0; i < r->output_tokens; i++) {
        size_t n = strlen(WORDS[i % N_WORDS]);
        memcpy(text + at, WORDS[i % N_WORDS], n);
        at += n;
    }
    text[at] = '\0';

    json_t *choices;
    if (r->kind == TD_SIM_CHAT)
        choices = json_pack("[{s:i, s:{s:s, s:s}, s:s}]", "index", 0, "message", "role",
                            "assistant", "content", text, "finish_reason", "length");
    else
        choices = json_pack("[{s:i, s:s, s:n, s:s}]", "index", 0, "text", text, "logprobs",
                            "finish_reason", "length");
    free(text);
    return envelope(r, y, 0, "choices", choices, 1);
}

char *td_sim_chunk_json(const td_sim_request *r, const td_sim_reply *y, unsigned index)
{
    if (index >= r->output_tokens)
        return envelope(r, y, 1, "choices", json_array(), 1);
    const char *word = WORDS[index % N_WORDS];
    json_t *finish = index + 1 == r->output_tokens ? json_string("length") : json_null();
    json_t *choices;
    if (r->kind != TD_SIM_CHAT)
        choices = json_pack("[{s:i, s:s, s:n, s:o}]", "index", 0, "text", word, "logprobs",
                            "finish_reason", finish);
    else if (index == 0)
        choices = json_pack("[{s:i, s:{s:s, s:s}, s:o}]", "index", 0, "delta", "role", "assistant",
                            "content", word, "finish_reason", finish);
    else
        choices = json_pack("[{s:i, s:{s:s}, s:o}]", "index", 0, "delta", "content", word,
                            "finish_reason", finish);
    return envelope(r, y, 1, "choices", choices, 0);
}

char *td_sim_error_json(const char *message, const char *type)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", message, "type", type,
                          "param", "code");
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
