/* estimate.c - a request's cost in its route's units: the estimate at entry
 * (jansson over the buffered request body) and the actual cost from the
 * response, read by a byte-at-a-time scanner that needs no buffer, so a
 * streamed response of any length is metered in constant memory. */
#include "gateway/estimate.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonfast.h"

/* ---- the estimate ---- */

/* Unicode code points of a UTF-8 string: the bytes that do not continue a
 * sequence. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Adds the text of v (a string, an array of strings / token ids / token-id
 * arrays / {"text": ...} parts) to *chars, and its token ids to *tokens.
 * Other shapes (images, tool calls) add nothing: they are not prompt text
 * the upstream counts at four characters a token. */
static void count_text(const json_t *v, int depth, double *chars, double *tokens)
{
    if (json_is_string(v)) {
        *chars += (double)utf8_chars(json_string_value(v), json_string_length(v));
    } else if (json_is_integer(v)) {
        *tokens += 1;
    } else if (json_is_object(v)) {
        const json_t *text = json_object_get(v, "text");
        if (json_is_string(text))
            count_text(text, depth + 1, chars, tokens);
    } else if (json_is_array(v) && depth < 2) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) count_text(e, depth + 1, chars, tokens);
    }
}

/* A non-negative integer field (integral reals too, as some clients send
 * 100.0). 1 found, 0 absent or null, -1 present and bad. */
static int int_field(const json_t *obj, const char *name, double *out)
{
    const json_t *v = json_object_get(obj, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return -1;
    double d = json_number_value(v);
    if (!(d >= 0) || d != floor(d) || !isfinite(d))
        return -1;
    *out = d;
    return 1;
}

static td_status estimate_tokens(const char *body, size_t len, td_cost_request *q, td_err *err)
{
    json_error_t je;
    /* jansson's values and errors without its per-byte reader: this parse
     * is most of a refused request's cost when a client floods 429s */
    json_t *root = td_json_loadb(body, len, &je);
    if (!root)
        return td_err_set(err, TD_EINVAL, "request body is not JSON: %s (line %d, column %d)",
                          je.text, je.line, je.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return td_err_set(err, TD_EINVAL, "request body must be a JSON object");
    }
    double chars = 0, tokens = 0;
    const json_t *messages = json_object_get(root, "messages");
    const json_t *prompt = json_object_get(root, "prompt");
    const json_t *input = json_object_get(root, "input");
    if (json_is_array(messages)) {
        size_t i;
        const json_t *m;
        json_array_foreach(messages, i, m)
            count_text(json_object_get(m, "content"), 0, &chars, &tokens);
    }
    count_text(prompt, 0, &chars, &tokens);
    count_text(input, 0, &chars, &tokens);

    int embeddings = input && !messages && !prompt;
    double max_tokens = embeddings ? 0 : TD_COST_DEFAULT_MAX_TOKENS, n = 1;
    int r = int_field(root, "max_tokens", &max_tokens);
    const char *bad = r < 0 ? "max_tokens" : NULL;
    if (r == 0 && (r = int_field(root, "max_completion_tokens", &max_tokens)) < 0)
        bad = "max_completion_tokens";
    if (!bad && (int_field(root, "n", &n) < 0 || n < 1))
        bad = "n";
    json_decref(root);
    if (bad)
        return td_err_set(err, TD_EINVAL, "%s must be a %s integer", bad,
                          strcmp(bad, "n") == 0 ? "positive" : "non-negative");
    q->estimate = ceil(chars / 4) + tokens + max_tokens * n;
    q->prompt = ceil(chars / 4) + tokens;
    q->choices = n;
    q->output_named = r > 0 || embeddings;
    return TD_OK;
}

/* A header's number: finite and >= 0. */
static int parse_nonneg(const char *s, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end == s || *end || errno || !isfinite(d) || d < 0)
        return -1;
    *out = d;
    return 0;
}

td_status td_cost_estimate(td_cost_model m, const char *body, size_t len,
                           const char *gpu_seconds_header, double default_gpu_seconds, double *out,
                           td_err *err)
{
    return td_cost_estimate_ex(m, body, len, gpu_seconds_header, default_gpu_seconds, out, NULL,
                               err);
}

td_status td_cost_estimate_ex(td_cost_model m, const char *body, size_t len,
                              const char *gpu_seconds_header, double default_gpu_seconds,
                              double *out, double *prompt_out, td_err *err)
{
    if (prompt_out)
        *prompt_out = 0;
    td_cost_request q;
    td_status st = td_cost_inspect(m, body, len, gpu_seconds_header, default_gpu_seconds, &q, err);
    if (st != TD_OK)
        return st;
    *out = q.estimate;
    if (prompt_out)
        *prompt_out = q.prompt;
    return TD_OK;
}

td_status td_cost_inspect(td_cost_model m, const char *body, size_t len,
                          const char *gpu_seconds_header, double default_gpu_seconds,
                          td_cost_request *out, td_err *err)
{
    td_cost_request q = {0, 0, 1, true};
    switch (m) {
    case TD_COST_TOKENS: {
        td_status st = estimate_tokens(body ? body : "", body ? len : 0, &q, err);
        if (st != TD_OK)
            return st;
        break;
    }
    case TD_COST_GPU_SECONDS: {
        double d = default_gpu_seconds;
        if (gpu_seconds_header && parse_nonneg(gpu_seconds_header, &d) < 0)
            return td_err_set(err, TD_EINVAL,
                              "X-GPU-Seconds-Estimate \"%.64s\" is not a number >= 0",
                              gpu_seconds_header);
        q.estimate = d;
        break;
    }
    case TD_COST_REQUESTS:
    default:
        q.estimate = 1;
        break;
    }
    *out = q;
    return TD_OK;
}

double td_cost_reserve_tokens(td_cost_model m, const td_cost_request *q, uint32_t max_output_tokens)
{
    if (m != TD_COST_TOKENS || q->output_named)
        return q->estimate;
    double per = max_output_tokens ? max_output_tokens : TD_COST_DEFAULT_MAX_OUTPUT_TOKENS;
    double r = q->prompt + per * (q->choices > 1 ? q->choices : 1);
    /* never below the estimate: a route's maximum under 16 still reserves
     * what the rate limits charged */
    return r > q->estimate ? r : q->estimate;
}

static void usage_from(const json_t *obj, td_usage *u)
{
    static const struct {
        const char *name;
        unsigned bit;
        size_t off;
    } f[] = {{"total_tokens", TD_USAGE_TOTAL, offsetof(td_usage, total_tokens)},
             {"prompt_tokens", TD_USAGE_PROMPT, offsetof(td_usage, prompt_tokens)},
             {"completion_tokens", TD_USAGE_COMPLETION, offsetof(td_usage, completion_tokens)},
             {"gpu_seconds", TD_USAGE_GPU_SECONDS, offsetof(td_usage, gpu_seconds)}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const json_t *v = json_object_get(obj, f[i].name);
        if (json_is_number(v)) {
            *(double *)((char *)u + f[i].off) = json_number_value(v);
            u->have |= f[i].bit;
        }
    }
}

td_status td_cost_usage_json(const char *body, size_t len, td_usage *u)
{
    memset(u, 0, sizeof *u);
    json_t *root = json_loadb(body, len, 0, NULL);
    if (!root)
        return TD_EINVAL;
    if (json_is_object(root)) {
        const json_t *usage = json_object_get(root, "usage");
        if (json_is_object(usage))
            usage_from(usage, u);
        const json_t *g = json_object_get(root, "gpu_seconds");
        if (json_is_number(g)) {
            u->gpu_seconds = json_number_value(g);
            u->have |= TD_USAGE_GPU_SECONDS;
        }
    }
    json_decref(root);
    return TD_OK;
}

/* ---- the scanner ----
 * A JSON tokenizer that keeps only what it needs: the depth, whether the
 * containers at depths 1 and 2 are objects, the key being read at those
 * depths (truncated keys never match), and the scalar being read. Values
 * are taken when the top-level object closes, so a document cut short or
 * broken contributes nothing. In SSE mode, a line state machine sends the
 * bytes of `data:` lines to it, one document per event. */

enum { LS_START, LS_PREFIX, LS_OTHER, LS_DATA_SPACE, LS_DATA };

static const char data_prefix[] = "data:";

static void doc_reset(td_cost_scanner *s)
{
    td_usage found = s->found;
    unsigned char sse = s->sse, line_state = s->line_state, prefix_pos = s->prefix_pos,
                  skip_lf = s->skip_lf, event_has_data = s->event_has_data,
                  event_open = s->event_open;
    memset(s, 0, sizeof *s);
    s->found = found;
    s->sse = sse;
    s->line_state = line_state;
    s->prefix_pos = prefix_pos;
    s->skip_lf = skip_lf;
    s->event_has_data = event_has_data;
    s->event_open = event_open;
}

void td_cost_scanner_init(td_cost_scanner *s, bool sse)
{
    memset(s, 0, sizeof *s);
    s->sse = sse;
    s->line_state = LS_START;
}

static int key_is(const char *key, unsigned char len, unsigned char over, const char *name)
{
    size_t n = strlen(name);
    return !over && len == n && memcmp(key, name, n) == 0;
}

/* A string closed: below depth 2, remember whether it was the key
 * "content" or "text" (a value after it is generated text). */
static void end_string(td_cost_scanner *s)
{
    if (s->deep_collect)
        s->deep_last_content =
            !s->deep_over && ((s->deep_len == 7 && memcmp(s->deep, "content", 7) == 0) ||
                              (s->deep_len == 4 && memcmp(s->deep, "text", 4) == 0));
    s->deep_collect = 0;
    s->deep_counting = 0;
}

static void end_scalar(td_cost_scanner *s)
{
    if (!s->in_scalar)
        return;
    s->in_scalar = 0;
    if (s->num_over || s->num_len == 0)
        return;
    double *dst = NULL;
    unsigned bit = 0;
    if (s->depth == 1 && s->obj1 && !s->want_key1 &&
        key_is(s->key1, s->key1_len, s->key1_over, "gpu_seconds")) {
        dst = &s->pending.gpu_seconds;
        bit = TD_USAGE_GPU_SECONDS;
    } else if (s->depth == 2 && s->in_usage && !s->want_key2) {
        static const struct {
            const char *name;
            unsigned bit;
            size_t off;
        } f[] = {{"total_tokens", TD_USAGE_TOTAL, offsetof(td_usage, total_tokens)},
                 {"prompt_tokens", TD_USAGE_PROMPT, offsetof(td_usage, prompt_tokens)},
                 {"completion_tokens", TD_USAGE_COMPLETION, offsetof(td_usage, completion_tokens)},
                 {"gpu_seconds", TD_USAGE_GPU_SECONDS, offsetof(td_usage, gpu_seconds)}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (key_is(s->key2, s->key2_len, s->key2_over, f[i].name)) {
                dst = (double *)((char *)&s->pending + f[i].off);
                bit = f[i].bit;
            }
    }
    if (!dst)
        return;
    char buf[sizeof s->num + 1];
    memcpy(buf, s->num, s->num_len);
    buf[s->num_len] = '\0';
    char *end;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d))
        return;
    *dst = d;
    s->pending.have |= bit;
}

static void commit(td_cost_scanner *s)
{
    const unsigned tokens = TD_USAGE_TOTAL | TD_USAGE_PROMPT | TD_USAGE_COMPLETION;
    if (s->usage_done) {
        s->found.have &= ~tokens;
        s->found.have |= s->pending.have & tokens;
        s->found.total_tokens = s->pending.total_tokens;
        s->found.prompt_tokens = s->pending.prompt_tokens;
        s->found.completion_tokens = s->pending.completion_tokens;
    }
    if (s->pending.have & TD_USAGE_GPU_SECONDS) {
        s->found.gpu_seconds = s->pending.gpu_seconds;
        s->found.have |= TD_USAGE_GPU_SECONDS;
    }
    memset(&s->pending, 0, sizeof s->pending);
    s->usage_done = 0;
}

static void open_container(td_cost_scanner *s, int is_obj)
{
    if (s->depth < UINT32_MAX)
        s->depth++;
    if (s->depth == 1) {
        s->obj1 = (unsigned char)is_obj;
        s->want_key1 = 1;
        s->key1_len = s->key1_over = 0;
    } else if (s->depth == 2) {
        s->in_usage = is_obj && s->obj1 && !s->want_key1 &&
                      key_is(s->key1, s->key1_len, s->key1_over, "usage");
        if (s->in_usage) {
            /* a second usage replaces the first; a gpu_seconds read
             * before it at the top level stays */
            s->pending.have &= TD_USAGE_GPU_SECONDS;
            s->usage_done = 0;
        }
        s->obj2 = (unsigned char)is_obj;
        s->want_key2 = 1;
        s->key2_len = s->key2_over = 0;
    }
}

static void close_container(td_cost_scanner *s)
{
    if (s->depth == 2 && s->in_usage) {
        s->in_usage = 0;
        s->usage_done = 1;
    } else if (s->depth == 1 && s->obj1) {
        commit(s);
    }
    if (s->depth > 0)
        s->depth--;
}

static void key_byte(td_cost_scanner *s, char c)
{
    if (s->depth == 1) {
        if (s->key1_len < sizeof s->key1)
            s->key1[s->key1_len++] = c;
        else
            s->key1_over = 1;
    } else {
        if (s->key2_len < sizeof s->key2)
            s->key2[s->key2_len++] = c;
        else
            s->key2_over = 1;
    }
}

static void json_bytes(td_cost_scanner *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (s->in_string) {
            if (s->u_skip) {
                s->u_skip--; /* hex digits of a \uXXXX escape */
            } else if (s->escape) {
                s->escape = 0;
                if (c == 'u')
                    s->u_skip = 4;
            } else if (c == '\\') {
                s->escape = 1;
                /* an escaped key is never one of ours; mark it so */
                if (s->key_collect)
                    *(s->depth == 1 ? &s->key1_over : &s->key2_over) = 1;
                s->deep_over = 1;
                if (s->deep_counting)
                    s->found.content_chars++; /* one character, however escaped */
            } else if (c == '"') {
                s->in_string = 0;
                end_string(s);
            } else {
                if (s->key_collect)
                    key_byte(s, c);
                if (s->deep_counting && ((unsigned char)c & 0xC0) != 0x80)
                    s->found.content_chars++;
                if (s->deep_collect) {
                    if (s->deep_len < sizeof s->deep)
                        s->deep[s->deep_len++] = c;
                    else
                        s->deep_over = 1;
                }
            }
            continue;
        }
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ':' && c != '"') {
            s->deep_after_colon = 0;
            s->deep_last_content = 0;
        }
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            end_scalar(s);
            break;
        case '"':
            end_scalar(s);
            s->in_string = 1;
            if (s->depth >= 3) {
                s->deep_counting = s->deep_after_colon;
                s->deep_collect = !s->deep_after_colon;
                s->deep_len = s->deep_over = 0;
                if (s->deep_counting)
                    s->found.have |= TD_USAGE_CONTENT;
            }
            s->deep_after_colon = 0;
            s->deep_last_content = 0;
            s->key_collect = (s->depth == 1 && s->obj1 && s->want_key1) ||
                             (s->depth == 2 && s->obj2 && s->want_key2);
            if (s->key_collect && s->depth == 1)
                s->key1_len = s->key1_over = 0;
            else if (s->key_collect)
                s->key2_len = s->key2_over = 0;
            break;
        case '{':
        case '[':
            end_scalar(s);
            open_container(s, c == '{');
            break;
        case '}':
        case ']':
            end_scalar(s);
            close_container(s);
            break;
        case ':':
        case ',':
            end_scalar(s);
            s->deep_after_colon = c == ':' && s->depth >= 3 && s->deep_last_content;
            s->deep_last_content = 0;
            if (s->depth == 1 && s->obj1)
                s->want_key1 = c == ',';
            else if (s->depth == 2 && s->obj2)
                s->want_key2 = c == ',';
            break;
        default:
            if (!s->in_scalar) {
                s->in_scalar = 1;
                s->num_len = s->num_over = 0;
            }
            if (s->num_len < sizeof s->num)
                s->num[s->num_len++] = c;
            else
                s->num_over = 1;
        }
    }
}

static void dispatch_event(td_cost_scanner *s)
{
    json_bytes(s, "\n", 1); /* ends a trailing scalar */
    s->event_has_data = 0;
    doc_reset(s);
}

static void end_line(td_cost_scanner *s)
{
    /* a line with something on it belongs to an event; a blank one ends it */
    s->event_open = s->line_state != LS_START;
    if (s->line_state == LS_START && s->event_has_data)
        dispatch_event(s);
    s->line_state = LS_START;
    s->prefix_pos = 0;
}

void td_cost_scanner_feed(td_cost_scanner *s, const char *p, size_t n)
{
    if (!s->sse) {
        json_bytes(s, p, n);
        return;
    }
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (s->skip_lf) {
            s->skip_lf = 0;
            if (c == '\n') {
                i++;
                continue;
            }
        }
        if (c == '\r' || c == '\n') {
            end_line(s);
            s->skip_lf = c == '\r';
            i++;
            continue;
        }
        switch (s->line_state) {
        case LS_START:
        case LS_PREFIX:
            if (c == data_prefix[s->prefix_pos]) {
                s->line_state = LS_PREFIX;
                if (++s->prefix_pos == sizeof data_prefix - 1) {
                    s->line_state = LS_DATA_SPACE;
                    /* lines of one event join with a newline */
                    if (s->event_has_data)
                        json_bytes(s, "\n", 1);
                    s->event_has_data = 1;
                }
            } else {
                s->line_state = LS_OTHER;
            }
            i++;
            break;
        case LS_OTHER:
            i++;
            break;
        case LS_DATA_SPACE:
            s->line_state = LS_DATA;
            if (c == ' ') {
                i++;
                break;
            }
            /* fall through */
        case LS_DATA: {
            size_t j = i;
            while (j < n && p[j] != '\r' && p[j] != '\n')
                j++;
            json_bytes(s, p + i, j - i);
            i = j;
            break;
        }
        }
    }
}

void td_cost_scanner_finish(td_cost_scanner *s, td_usage *u)
{
    if (s->sse) {
        if (s->line_state != LS_START)
            end_line(s);
        if (s->event_has_data)
            dispatch_event(s);
    } else {
        json_bytes(s, "\n", 1);
    }
    *u = s->found;
}

bool td_cost_actual(td_cost_model m, const td_usage *u, const char *gpu_seconds_header,
                    double estimate, double *actual)
{
    double d;
    switch (m) {
    case TD_COST_TOKENS:
        if (u && (u->have & TD_USAGE_TOTAL)) {
            *actual = u->total_tokens;
            return true;
        }
        if (u && (u->have & (TD_USAGE_PROMPT | TD_USAGE_COMPLETION))) {
            *actual = ((u->have & TD_USAGE_PROMPT) ? u->prompt_tokens : 0) +
                      ((u->have & TD_USAGE_COMPLETION) ? u->completion_tokens : 0);
            return true;
        }
        break;
    case TD_COST_GPU_SECONDS:
        if (gpu_seconds_header && parse_nonneg(gpu_seconds_header, &d) == 0) {
            *actual = d;
            return true;
        }
        if (u && (u->have & TD_USAGE_GPU_SECONDS) && u->gpu_seconds >= 0) {
            *actual = u->gpu_seconds;
            return true;
        }
        break;
    case TD_COST_REQUESTS:
        *actual = 1;
        return true;
    }
    *actual = estimate;
    return false;
}

void td_cost_settle_cut(const td_usage *seen, double prompt_est, double reserve_tokens,
                        double *tokens_in, double *tokens_out)
{
    const unsigned tokens = TD_USAGE_TOTAL | TD_USAGE_PROMPT | TD_USAGE_COMPLETION;
    if (seen && (seen->have & (TD_USAGE_PROMPT | TD_USAGE_COMPLETION))) {
        *tokens_in = (seen->have & TD_USAGE_PROMPT) ? seen->prompt_tokens : 0;
        *tokens_out = (seen->have & TD_USAGE_COMPLETION) ? seen->completion_tokens : 0;
        return;
    }
    if (seen && (seen->have & tokens)) { /* a total alone */
        *tokens_in = seen->total_tokens;
        *tokens_out = 0;
        return;
    }
    double out = seen ? ceil(seen->content_chars / 4) : 0;
    if (prompt_est + out < reserve_tokens)
        out = reserve_tokens - prompt_est;
    *tokens_in = prompt_est;
    *tokens_out = out > 0 ? out : 0;
}

double td_cost_counted_tokens(const td_cost_scanner *s, double prompt_est)
{
    return prompt_est + ceil(s->found.content_chars / 4);
}

bool td_cost_scanner_at_event_end(const td_cost_scanner *s)
{
    return !s->sse || (s->line_state == LS_START && !s->event_open);
}

size_t td_cost_scanner_feed_to_event_end(td_cost_scanner *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && !td_cost_scanner_at_event_end(s))
        td_cost_scanner_feed(s, p + i++, 1);
    return i;
}
