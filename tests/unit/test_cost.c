/* test_cost.c - cost.c: estimates at entry per cost model (OpenAI chat,
 * completions and embeddings bodies, headers, bad input), the actual cost
 * from usage, and the incremental response scanner fed whole, split in two
 * at every byte position, and byte by byte, checked against jansson. Each
 * table loop reports every failing row, then fails once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/estimate.h"

#define T TD_COST_TOKENS
#define G TD_COST_GPU_SECONDS
#define R TD_COST_REQUESTS

/* ---- estimates ---- */

static void test_estimate_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_cost_model model;
        const char *body;
        const char *gpu_header;
        double want;
        td_status want_st;
        const char *want_msg; /* substring of the error, or NULL */
    } rows[] = {
        {"chat: 12 chars + max_tokens", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"hello world!\"}],\"max_tokens\":10}",
         NULL, 3 + 10, TD_OK, NULL},
        {"chat: characters of all messages add before rounding", T,
         "{\"messages\":[{\"role\":\"system\",\"content\":\"ab\"},{\"role\":\"user\",\"content\":"
         "\"abc\"}],\"max_tokens\":0}",
         NULL, 2, TD_OK, NULL},
        {"chat: content parts, image part ignored", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"abcd\"},"
         "{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/very/long/url\"}}]}]}",
         NULL, 1 + 16, TD_OK, NULL},
        {"chat: no max_tokens defaults to 16", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"abcdefgh\"}]}", NULL, 2 + 16, TD_OK,
         NULL},
        {"chat: max_completion_tokens", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_completion_tokens\":7}", NULL,
         1 + 7, TD_OK, NULL},
        {"chat: max_tokens wins over max_completion_tokens", T,
         "{\"messages\":[],\"max_tokens\":3,\"max_completion_tokens\":7}", NULL, 3, TD_OK, NULL},
        {"chat: max_tokens null is absent", T, "{\"messages\":[],\"max_tokens\":null}", NULL, 16,
         TD_OK, NULL},
        {"chat: max_tokens 100.0 is an integer", T, "{\"messages\":[],\"max_tokens\":100.0}", NULL,
         100, TD_OK, NULL},
        {"chat: n choices multiply the completion", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\"}],\"max_tokens\":10,\"n\":3}",
         NULL, 1 + 30, TD_OK, NULL},
        {"chat: null content (tool call) counts nothing", T,
         "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],"
         "\"max_tokens\":1}",
         NULL, 1, TD_OK, NULL},
        {"chat: code points, not bytes", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"h\xc3\xa9llo\"}],\"max_tokens\":0}", NULL,
         2, TD_OK, NULL},
        {"chat: CJK, four code points a token", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"
         "\xe3\x81\xa7\xe3\x81\x99\"}],\"max_tokens\":0}",
         NULL, 2, TD_OK, NULL},
        {"chat: JSON escapes count as their character", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"\\u00e9\\n\\\"x\"}],\"max_tokens\":0}",
         NULL, 1, TD_OK, NULL},
        {"completions: prompt string", T, "{\"prompt\":\"abcde\",\"max_tokens\":0}", NULL, 2, TD_OK,
         NULL},
        {"completions: prompt array of strings", T, "{\"prompt\":[\"ab\",\"cd\",\"e\"]}", NULL,
         2 + 16, TD_OK, NULL},
        {"completions: prompt of token ids", T, "{\"prompt\":[1,2,3],\"max_tokens\":1}", NULL,
         3 + 1, TD_OK, NULL},
        {"embeddings: input string, no completion", T, "{\"input\":\"abcdefgh\",\"model\":\"m\"}",
         NULL, 2, TD_OK, NULL},
        {"embeddings: input array of strings", T, "{\"input\":[\"abcd\",\"abcde\"]}", NULL, 3,
         TD_OK, NULL},
        {"embeddings: token-id arrays", T, "{\"input\":[[1,2],[3]]}", NULL, 3, TD_OK, NULL},
        {"empty object: the default completion", T, "{}", NULL, 16, TD_OK, NULL},
        {"whitespace around the object", T, " \n{\"prompt\":\"abcd\",\"max_tokens\":0}\r\n", NULL,
         1, TD_OK, NULL},
        {"not JSON", T, "hello", NULL, 0, TD_EINVAL, "not JSON"},
        {"empty body", T, "", NULL, 0, TD_EINVAL, "not JSON"},
        {"truncated JSON", T, "{\"prompt\":\"ab", NULL, 0, TD_EINVAL, "not JSON"},
        {"JSON array", T, "[1,2]", NULL, 0, TD_EINVAL, "JSON object"},
        {"trailing garbage", T, "{} x", NULL, 0, TD_EINVAL, "not JSON"},
        {"max_tokens negative", T, "{\"prompt\":\"a\",\"max_tokens\":-1}", NULL, 0, TD_EINVAL,
         "max_tokens must be a non-negative integer"},
        {"max_tokens a string", T, "{\"prompt\":\"a\",\"max_tokens\":\"10\"}", NULL, 0, TD_EINVAL,
         "max_tokens"},
        {"max_tokens fractional", T, "{\"prompt\":\"a\",\"max_tokens\":1.5}", NULL, 0, TD_EINVAL,
         "max_tokens"},
        {"max_completion_tokens bad", T, "{\"max_completion_tokens\":true}", NULL, 0, TD_EINVAL,
         "max_completion_tokens"},
        {"n zero", T, "{\"prompt\":\"a\",\"n\":0}", NULL, 0, TD_EINVAL, "n must be a positive"},
        {"gpuSeconds: the route default", G, "not json is fine here", NULL, 2.5, TD_OK, NULL},
        {"gpuSeconds: the header", G, "", "0.75", 0.75, TD_OK, NULL},
        {"gpuSeconds: header with blanks", G, "", " 3 ", 3, TD_OK, NULL},
        {"gpuSeconds: header not a number", G, "", "abc", 0, TD_EINVAL, "X-GPU-Seconds-Estimate"},
        {"gpuSeconds: header negative", G, "", "-1", 0, TD_EINVAL, "X-GPU-Seconds-Estimate"},
        {"gpuSeconds: header infinite", G, "", "inf", 0, TD_EINVAL, "X-GPU-Seconds-Estimate"},
        {"gpuSeconds: header trailing junk", G, "", "1s", 0, TD_EINVAL, "X-GPU-Seconds-Estimate"},
        {"requests: always 1", R, "whatever", "9", 1, TD_OK, NULL},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double got = -1;
        td_err err = {{0}};
        td_status st = td_cost_estimate(rows[i].model, rows[i].body, strlen(rows[i].body),
                                        rows[i].gpu_header, 2.5, &got, &err);
        if (st != rows[i].want_st || (st == TD_OK && got != rows[i].want) ||
            (rows[i].want_msg && !strstr(err.msg, rows[i].want_msg))) {
            print_error("row \"%s\": status %d cost %g msg \"%s\"; want status %d cost %g msg "
                        "\"%s\"\n",
                        rows[i].name, st, got, err.msg, rows[i].want_st, rows[i].want,
                        rows[i].want_msg ? rows[i].want_msg : "");
            failed++;
        }
        if (st != TD_OK && got != -1) {
            print_error("row \"%s\": *out written on failure\n", rows[i].name);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

static void test_estimate_not_nul_terminated(void **state)
{
    (void)state;
    /* the body is a length, not a C string: what follows must not count */
    const char buf[] = "{\"prompt\":\"abcd\",\"max_tokens\":0}GARBAGE";
    double got = 0;
    assert_int_equal(td_cost_estimate(T, buf, sizeof buf - 1 - 7, NULL, 1, &got, NULL), TD_OK);
    assert_true(got == 1);
    assert_int_equal(td_cost_estimate(T, NULL, 0, NULL, 1, &got, NULL), TD_EINVAL);
}

/* ---- the scanner ---- */

typedef struct {
    const char *name;
    int sse;
    const char *body;
    unsigned want_have;
    double total, prompt, completion, gpu;
} scan_row;

#define TOK   (TD_USAGE_TOTAL | TD_USAGE_PROMPT | TD_USAGE_COMPLETION)
#define GPU   TD_USAGE_GPU_SECONDS
#define SIMJS "{\"id\":\"cmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"

static const scan_row scan_rows[] = {
    {"json: simmodel-like response", 0,
     SIMJS "\"message\":{\"role\":\"assistant\",\"content\":\"tok tok\"}}],"
           "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}",
     TOK, 8, 3, 5, 0},
    {"json: usage first, pretty-printed", 0,
     "{\n  \"usage\": {\n    \"total_tokens\": 1234,\n    \"prompt_tokens\": 1000\n  },\n"
     "  \"choices\": []\n}\n",
     TD_USAGE_TOTAL | TD_USAGE_PROMPT, 1234, 1000, 0, 0},
    {"json: usage text inside a string is not usage", 0,
     SIMJS "\"text\":\"\\\"usage\\\": {\\\"total_tokens\\\": 999}\"}],"
           "\"usage\":{\"total_tokens\":7}}",
     TD_USAGE_TOTAL, 7, 0, 0, 0},
    {"json: a nested usage does not count", 0,
     "{\"choices\":[{\"usage\":{\"total_tokens\":99}}],\"data\":{\"usage\":{\"total_tokens\":98}}}",
     0, 0, 0, 0, 0},
    {"json: usage null", 0, "{\"usage\":null,\"x\":1}", 0, 0, 0, 0, 0},
    {"json: usage with gpu_seconds", 0, "{\"usage\":{\"total_tokens\":10,\"gpu_seconds\":0.25}}",
     TD_USAGE_TOTAL | GPU, 10, 0, 0, 0.25},
    {"json: top-level gpu_seconds, exponent", 0, "{\"gpu_seconds\":1.5e-1,\"usage\":{}}", GPU, 0, 0,
     0, 0.15},
    {"json: keys that only start alike", 0,
     "{\"usage_x\":{\"total_tokens\":5},\"usage\":{\"total_tokens_x\":6,\"total_tokens\":4}}",
     TD_USAGE_TOTAL, 4, 0, 0, 0},
    {"json: escaped key never matches", 0, "{\"us\\u0061ge\":{\"total_tokens\":5}}", 0, 0, 0, 0, 0},
    {"json: truncated before the end counts nothing", 0,
     "{\"usage\":{\"total_tokens\":8},\"choices\":[", 0, 0, 0, 0, 0},
    {"json: a string value is not a number", 0, "{\"usage\":{\"total_tokens\":\"8\"}}", 0, 0, 0, 0,
     0},
    {"json: a very long number is ignored", 0,
     "{\"usage\":{\"total_tokens\":1111111111111111111111111111111111111111111111111}}", 0, 0, 0, 0,
     0},
    {"json: not JSON at all", 0, "<html>502 Bad Gateway</html>", 0, 0, 0, 0, 0},
    {"json: deeper nesting in usage is skipped", 0,
     "{\"usage\":{\"details\":{\"total_tokens\":1,\"cached\":[1,{\"a\":2}]},\"total_tokens\":9}}",
     TD_USAGE_TOTAL, 9, 0, 0, 0},
    {"sse: OpenAI stream, usage in the last chunk", 1,
     "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n"
     "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":null}\n\n"
     "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,"
     "\"total_tokens\":6},\"gpu_seconds\":0.5}\n\n"
     "data: [DONE]\n\n",
     TOK | GPU, 6, 4, 2, 0.5},
    {"sse: CRLF lines, no space after the colon", 1,
     "data:{\"x\":1}\r\n\r\ndata:{\"usage\":{\"total_tokens\":11}}\r\n\r\ndata:[DONE]\r\n\r\n",
     TD_USAGE_TOTAL, 11, 0, 0, 0},
    {"sse: CR-only lines", 1, "data: {\"usage\":{\"total_tokens\":12}}\r\rdata: [DONE]\r\r",
     TD_USAGE_TOTAL, 12, 0, 0, 0},
    {"sse: the last usage wins", 1,
     "data: {\"usage\":{\"total_tokens\":1,\"prompt_tokens\":1}}\n\n"
     "data: {\"usage\":{\"total_tokens\":2}}\n\n",
     TD_USAGE_TOTAL, 2, 0, 0, 0},
    {"sse: comments, event and id lines are ignored", 1,
     ": keep-alive\n\nevent: message\nid: 7\ndata: {\"usage\":{\"total_tokens\":13}}\n\n"
     "retry: 100\n\n",
     TD_USAGE_TOTAL, 13, 0, 0, 0},
    {"sse: one event over two data lines", 1, "data: {\"usage\":\ndata: {\"total_tokens\":14}}\n\n",
     TD_USAGE_TOTAL, 14, 0, 0, 0},
    {"sse: a line that only starts like data", 1,
     "dat: {\"usage\":{\"total_tokens\":1}}\n\ndata {\"usage\":{\"total_tokens\":2}}\n\n"
     "xdata: {\"usage\":{\"total_tokens\":3}}\n\n",
     0, 0, 0, 0, 0},
    {"sse: no blank line after the last event", 1,
     "data: {\"x\":[1,2]}\n\ndata: {\"usage\":{\"total_tokens\":15}}", TD_USAGE_TOTAL, 15, 0, 0, 0},
    {"sse: a broken event does not spoil the next", 1,
     "data: {\"usage\":{\"total_tokens\":99\n\ndata: {\"usage\":{\"total_tokens\":16}}\n\n",
     TD_USAGE_TOTAL, 16, 0, 0, 0},
    {"sse: data: [DONE] only", 1, "data: [DONE]\n\n", 0, 0, 0, 0, 0},
    {"sse: empty stream", 1, "", 0, 0, 0, 0, 0},
};

static int usage_eq(const td_usage *u, const scan_row *r)
{
    if ((u->have & ~TD_USAGE_CONTENT) != r->want_have) /* content: test_scanner_content */
        return 0;
    if ((u->have & TD_USAGE_TOTAL) && u->total_tokens != r->total)
        return 0;
    if ((u->have & TD_USAGE_PROMPT) && u->prompt_tokens != r->prompt)
        return 0;
    if ((u->have & TD_USAGE_COMPLETION) && u->completion_tokens != r->completion)
        return 0;
    if ((u->have & GPU) && u->gpu_seconds != r->gpu)
        return 0;
    return 1;
}

static void scan_pieces(const scan_row *r, const size_t *cuts, size_t ncuts, td_usage *u)
{
    td_cost_scanner s;
    td_cost_scanner_init(&s, r->sse);
    size_t len = strlen(r->body), at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        td_cost_scanner_feed(&s, r->body + at, end - at);
        at = end;
    }
    td_cost_scanner_finish(&s, u);
}

static int check_scan(const scan_row *r, const char *how, const td_usage *u)
{
    if (usage_eq(u, r))
        return 0;
    print_error("row \"%s\" (%s): have %#x total %g prompt %g completion %g gpu %g; want %#x "
                "%g %g %g %g\n",
                r->name, how, u->have, u->total_tokens, u->prompt_tokens, u->completion_tokens,
                u->gpu_seconds, r->want_have, r->total, r->prompt, r->completion, r->gpu);
    return 1;
}

static void test_scanner_whole_and_split(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof scan_rows / sizeof scan_rows[0]; i++) {
        const scan_row *r = &scan_rows[i];
        size_t len = strlen(r->body);
        td_usage u;
        scan_pieces(r, NULL, 0, &u);
        failed += check_scan(r, "whole", &u);
        for (size_t cut = 0; cut <= len; cut++) {
            char how[64];
            snprintf(how, sizeof how, "split at %zu", cut);
            scan_pieces(r, &cut, 1, &u);
            if (check_scan(r, how, &u)) {
                failed++;
                break;
            }
        }
        size_t *every = malloc((len ? len : 1) * sizeof *every);
        assert_non_null(every);
        for (size_t k = 0; k < len; k++)
            every[k] = k;
        scan_pieces(r, every, len, &u);
        failed += check_scan(r, "byte by byte", &u);
        free(every);
    }
    assert_int_equal(failed, 0);
}

/* Generated text counted for responses without usage: code points of the
 * "content"/"text" values below the top two levels, over every event, the
 * same however the body is split. */
static void test_scanner_content(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int sse;
        const char *body;
        bool have;
        double chars;
    } rows[] = {
        {"sse chat deltas, no usage", 1,
         "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
         "data: {\"choices\":[{\"delta\":{\"content\":\"h\xc3\xa9llo\"}}]}\n\n"
         "data: {\"choices\":[{\"delta\":{\"content\":\" wo\"}}]}\n\n"
         "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"rld\"},\"x\":1}]}\n\n"
         "data: [DONE]\n\n",
         true, 11},
        {"sse completions text", 1,
         "data: {\"choices\":[{\"text\":\"abc\"}]}\n\ndata: {\"choices\":[{\"text\":\"de\"}]}\n\n",
         true, 5},
        {"escapes count one character each", 1,
         "data: {\"choices\":[{\"delta\":{\"content\":\"a\\nb\\u00e9\\\"\"}}]}\n\n", true, 5},
        {"a whole chat response", 0,
         "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"tok tok\"}}],"
         "\"usage\":{\"total_tokens\":8}}",
         true, 7},
        {"role only", 1, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", false,
         0},
        {"top-level text is not generated text", 0, "{\"text\":\"abc\",\"x\":{\"content\":\"d\"}}",
         false, 0},
        {"the value \"content\" is not a key", 0,
         "{\"choices\":[{\"x\":\"content\",\"y\":\"abc\"}]}", false, 0},
        {"content parts", 0,
         "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}]}", true,
         2},
        {"a number after content is not text", 0, "{\"choices\":[{\"content\":5,\"a\":\"bc\"}]}",
         false, 0},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t len = strlen(rows[i].body);
        for (size_t cut = 0; cut <= len; cut++) {
            td_cost_scanner sc;
            td_usage u;
            td_cost_scanner_init(&sc, rows[i].sse);
            td_cost_scanner_feed(&sc, rows[i].body, cut);
            td_cost_scanner_feed(&sc, rows[i].body + cut, len - cut);
            td_cost_scanner_finish(&sc, &u);
            bool have = (u.have & TD_USAGE_CONTENT) != 0;
            if (have != rows[i].have || u.content_chars != rows[i].chars) {
                print_error("row \"%s\" split at %zu: have %d chars %g, want %d %g\n", rows[i].name,
                            cut, have, u.content_chars, rows[i].have, rows[i].chars);
                failed++;
                break;
            }
        }
    }
    assert_int_equal(failed, 0);
    double est = 0, prompt = -1;
    assert_int_equal(td_cost_estimate_ex(T, "{\"prompt\":\"12345678\",\"max_tokens\":10}", 37, NULL,
                                         1, &est, &prompt, NULL),
                     TD_OK);
    assert_true(est == 12 && prompt == 2);
}

/* For every non-SSE row that is JSON, the scanner agrees with jansson. */
static void test_scanner_agrees_with_jansson(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof scan_rows / sizeof scan_rows[0]; i++) {
        const scan_row *r = &scan_rows[i];
        td_usage want;
        if (r->sse || td_cost_usage_json(r->body, strlen(r->body), &want) != TD_OK)
            continue;
        /* jansson reads escaped keys and long numbers the scanner skips on
         * purpose; those rows are not compared */
        if (strstr(r->body, "\\u0061") || strstr(r->body, "11111111111"))
            continue;
        td_usage got;
        scan_pieces(r, NULL, 0, &got);
        if ((got.have & ~TD_USAGE_CONTENT) != want.have || got.total_tokens != want.total_tokens ||
            got.prompt_tokens != want.prompt_tokens ||
            got.completion_tokens != want.completion_tokens ||
            got.gpu_seconds != want.gpu_seconds) {
            print_error("row \"%s\": scanner %#x/%g, jansson %#x/%g\n", r->name, got.have,
                        got.total_tokens, want.have, want.total_tokens);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
    td_usage u;
    assert_int_equal(td_cost_usage_json("nope", 4, &u), TD_EINVAL);
}

/* A long stream in small, odd-sized chunks: memory stays in the struct, and
 * only the last usage counts. */
static void test_scanner_long_stream(void **state)
{
    (void)state;
    td_cost_scanner s;
    td_cost_scanner_init(&s, true);
    char ev[256];
    size_t fed = 0;
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(ev, sizeof ev,
                         "data: {\"choices\":[{\"delta\":{\"content\":\"tok%d\"}}],\"usage\":null}"
                         "\n\n",
                         i);
        for (int k = 0; k < n; k += 7)
            td_cost_scanner_feed(&s, ev + k, (size_t)(n - k < 7 ? n - k : 7));
        fed += (size_t)n;
    }
    const char fin[] = "data: {\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20000,"
                       "\"total_tokens\":20010},\"gpu_seconds\":3}\n\ndata: [DONE]\n\n";
    td_cost_scanner_feed(&s, fin, sizeof fin - 1);
    td_usage u;
    td_cost_scanner_finish(&s, &u);
    assert_true(fed > 1000000);
    assert_true(u.have & TD_USAGE_TOTAL);
    assert_true(u.total_tokens == 20010);
    assert_true(u.gpu_seconds == 3);
}

/* ---- the actual cost ---- */

static void test_actual_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_cost_model model;
        td_usage u;
        const char *gpu_header;
        double estimate, want;
        bool want_known;
    } rows[] = {
        {"tokens: total", T, {TOK, 30, 10, 20, 0, 0}, NULL, 50, 30, true},
        {"tokens: prompt + completion without total",
         T,
         {TD_USAGE_PROMPT | TD_USAGE_COMPLETION, 0, 10, 5, 0, 0},
         NULL,
         50,
         15,
         true},
        {"tokens: prompt only (embeddings)",
         T,
         {TD_USAGE_PROMPT, 0, 12, 0, 0, 0},
         NULL,
         50,
         12,
         true},
        {"tokens: nothing, the estimate stands", T, {0, 0, 0, 0, 0, 0}, NULL, 50, 50, false},
        {"tokens: zero is a real answer", T, {TD_USAGE_TOTAL, 0, 0, 0, 0, 0}, NULL, 50, 0, true},
        {"gpuSeconds: the response header", G, {GPU, 0, 0, 0, 9, 0}, "0.3", 1, 0.3, true},
        {"gpuSeconds: from the stream", G, {GPU, 0, 0, 0, 0.7, 0}, NULL, 1, 0.7, true},
        {"gpuSeconds: bad header, stream value", G, {GPU, 0, 0, 0, 0.7, 0}, "x", 1, 0.7, true},
        {"gpuSeconds: nothing", G, {TOK, 5, 0, 0, 0, 0}, NULL, 1, 1, false},
        {"requests: 1", R, {TOK, 5, 0, 0, 0, 0}, NULL, 1, 1, true},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double got = -1;
        bool known =
            td_cost_actual(rows[i].model, &rows[i].u, rows[i].gpu_header, rows[i].estimate, &got);
        if (got != rows[i].want || known != rows[i].want_known) {
            print_error("row \"%s\": %g (%d), want %g (%d)\n", rows[i].name, got, known,
                        rows[i].want, rows[i].want_known);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* ---- the reservation ---- */

static void test_reserve_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_cost_model model;
        const char *body;
        uint32_t max_output; /* the Route's spec.cost.maxOutputTokens, 0 unset */
        double estimate, reserve;
        bool named;
    } rows[] = {
        {"no max_tokens: the default 4096", T, "{\"prompt\":\"12345678\"}", 0, 2 + 16, 2 + 4096,
         false},
        {"no max_tokens: the route's maximum", T, "{\"prompt\":\"12345678\"}", 500, 18, 502, false},
        {"no max_tokens, n = 3: per choice", T, "{\"prompt\":\"12345678\",\"n\":3}", 100, 2 + 48,
         2 + 300, false},
        {"max_tokens named: the estimate", T, "{\"prompt\":\"12345678\",\"max_tokens\":10}", 500,
         12, 12, true},
        {"max_tokens 0 named: the estimate", T, "{\"prompt\":\"12345678\",\"max_tokens\":0}", 500,
         2, 2, true},
        {"max_completion_tokens named", T,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\"}],\"max_completion_tokens\":7}",
         0, 8, 8, true},
        {"max_tokens null: not named", T, "{\"prompt\":\"12345678\",\"max_tokens\":null}", 0, 18,
         4098, false},
        {"embeddings: no output", T, "{\"input\":\"12345678\"}", 0, 2, 2, true},
        {"a route maximum below 16 never reserves under the estimate", T,
         "{\"prompt\":\"12345678\"}", 4, 18, 18, false},
        {"gpuSeconds: the estimate", G, "", 100, 1, 1, true},
        {"requests: 1", R, "", 100, 1, 1, true},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_cost_request q;
        td_err err = {{0}};
        if (td_cost_inspect(rows[i].model, rows[i].body, strlen(rows[i].body), NULL, 1, &q, &err) !=
            TD_OK) {
            print_error("row \"%s\": %s\n", rows[i].name, err.msg);
            failed++;
            continue;
        }
        double res = td_cost_reserve_tokens(rows[i].model, &q, rows[i].max_output);
        if (q.estimate != rows[i].estimate || res != rows[i].reserve ||
            q.output_named != rows[i].named) {
            print_error("row \"%s\": estimate %g reserve %g named %d, want %g %g %d\n",
                        rows[i].name, q.estimate, res, q.output_named, rows[i].estimate,
                        rows[i].reserve, rows[i].named);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* ---- what a request ended early is charged ---- */

static void test_settle_cut_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool scanned;
        td_usage seen;
        double prompt, reserve, want_in, want_out;
    } rows[] = {
        {"nothing scanned: the reservation", false, {0, 0, 0, 0, 0, 0}, 10, 2010, 10, 2000},
        {"little delivered: the reservation", true, {TD_USAGE_CONTENT, 0, 0, 0, 0, 400}, 10, 2010,
         10, 2000},
        {"more delivered than reserved: the counted tokens", true,
         {TD_USAGE_CONTENT, 0, 0, 0, 0, 9001}, 10, 2010, 10, 2251},
        {"counted exactly the reservation", true, {TD_USAGE_CONTENT, 0, 0, 0, 0, 8000}, 10, 2010, 10,
         2000},
        {"the upstream's usage stands, even below the reservation", true,
         {TD_USAGE_PROMPT | TD_USAGE_COMPLETION | TD_USAGE_CONTENT, 0, 12, 30, 0, 120}, 10, 2010, 12,
         30},
        {"a total alone", true, {TD_USAGE_TOTAL, 77, 0, 0, 0, 0}, 10, 2010, 77, 0},
        {"a reservation below the prompt charges the prompt", true, {0, 0, 0, 0, 0, 0}, 10, 4, 10,
         0},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double in = -1, out = -1;
        td_cost_settle_cut(rows[i].scanned ? &rows[i].seen : NULL, rows[i].prompt, rows[i].reserve,
                           &in, &out);
        if (in != rows[i].want_in || out != rows[i].want_out) {
            print_error("row \"%s\": in %g out %g, want %g %g\n", rows[i].name, in, out,
                        rows[i].want_in, rows[i].want_out);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* The counted tokens grow as a stream is fed, before it ends: what the
 * gateway's budget check reads event by event. */
static void test_counted_tokens_mid_stream(void **state)
{
    (void)state;
    td_cost_scanner s;
    td_cost_scanner_init(&s, true);
    assert_true(td_cost_counted_tokens(&s, 5) == 5);
    const char ev[] = "data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh\"}}]}\n\n";
    for (int i = 0; i < 3; i++)
        td_cost_scanner_feed(&s, ev, sizeof ev - 1);
    assert_true(td_cost_counted_tokens(&s, 5) == 5 + 6);
    /* half an event: its characters so far count (they were forwarded) */
    td_cost_scanner_feed(&s, ev, 40);
    assert_true(td_cost_counted_tokens(&s, 5) == 5 + 7);
}

/* Where a stream may be cut: between events, after the event in progress. */
static void test_event_end_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *fed, *next;
        bool at_end;
        size_t want; /* bytes of next up to the end of the event in progress */
    } rows[] = {
        {"nothing fed", "", "data: {}\n\n", true, 0},
        {"after a blank line", "data: {\"a\":1}\n\n", "data: {}\n\n", true, 0},
        {"inside the prefix", "da", "ta: {}\n\ndata: x\n\n", false, 8},
        {"inside the JSON", "data: {\"a\":", "1}\n\ndata: {}\n\n", false, 4},
        {"one newline of two", "data: {}\n", "\ndata: {}\n\n", false, 1},
        {"CRLF lines: the CR of the blank line ends it", "data: {}\r\n", "\r\ndata: {}\r\n\r\n", false, 1},
        {"an event: field opens an event", "event: delta\n", "data: {}\n\n", false, 10},
        {"a comment line, then the blank", ": keep-alive\n", "\n", false, 1},
        {"no end in sight", "data: {\"a\":", "\"bcd", false, 4},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_cost_scanner s;
        td_cost_scanner_init(&s, true);
        td_cost_scanner_feed(&s, rows[i].fed, strlen(rows[i].fed));
        bool at = td_cost_scanner_at_event_end(&s);
        size_t k = td_cost_scanner_feed_to_event_end(&s, rows[i].next, strlen(rows[i].next));
        if (at != rows[i].at_end || k != rows[i].want) {
            print_error("row \"%s\": at end %d, %zu bytes, want %d %zu\n", rows[i].name, at, k,
                        rows[i].at_end, rows[i].want);
            failed++;
        }
    }
    td_cost_scanner j;
    td_cost_scanner_init(&j, false);
    td_cost_scanner_feed(&j, "{\"a\":", 5);
    assert_true(td_cost_scanner_at_event_end(&j)); /* not SSE: no events to keep whole */
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_table),
        cmocka_unit_test(test_estimate_not_nul_terminated),
        cmocka_unit_test(test_scanner_whole_and_split),
        cmocka_unit_test(test_scanner_agrees_with_jansson),
        cmocka_unit_test(test_scanner_long_stream),
        cmocka_unit_test(test_scanner_content),
        cmocka_unit_test(test_actual_table),
        cmocka_unit_test(test_reserve_table),
        cmocka_unit_test(test_settle_cut_table),
        cmocka_unit_test(test_counted_tokens_mid_stream),
        cmocka_unit_test(test_event_end_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
