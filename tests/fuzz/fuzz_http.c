/* fuzz_http.c - libFuzzer target for the server's request processing: the
 * input is one connection's bytes, cut into pieces as the network might
 * deliver them, run through td__http_serve_pieces (no sockets). Build with
 * -DTD_FUZZ=ON -DCMAKE_C_COMPILER=clang, and add
 * -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link so that the library is
 * instrumented for coverage too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/http_internal.h"

#define MAX_PIECES 16

static void handler(const td_http_request *req, td_http_response *resp, void *user)
{
    (void)user;
    /* touch everything the server hands out, so ASan checks it */
    size_t sum = strlen(req->method) + strlen(req->path) + strlen(req->query);
    for (size_t i = 0; i < req->n_headers; i++)
        sum += strlen(req->headers[i].name) + strlen(req->headers[i].value);
    if (req->body[req->body_len] != '\0')
        abort();
    const char *ct = td_http_header(req, "content-type");
    resp->status = (int)(200 + sum % 400);
    resp->content_type = ct;
    if (strcmp(req->path, "/retry") == 0)
        resp->extra_headers = "Retry-After: 1\r\n";
    if (req->body_len) {
        resp->body = malloc(req->body_len);
        if (resp->body) {
            memcpy(resp->body, req->body, req->body_len);
            resp->body_len = req->body_len;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *pieces[MAX_PIECES];
    size_t lens[MAX_PIECES];
    size_t n = 0;

    /* first byte: how many cuts; the bytes after it pick where */
    if (size == 0)
        return 0;
    size_t cuts = data[0] % MAX_PIECES;
    data++;
    size--;
    size_t pos = 0;
    for (size_t i = 0; i < cuts && pos < size && n < MAX_PIECES - 1; i++) {
        size_t len = 1 + (size_t)data[(pos * 31 + i) % size] % 64;
        if (len > size - pos)
            len = size - pos;
        pieces[n] = (const char *)data + pos;
        lens[n++] = len;
        pos += len;
    }
    pieces[n] = (const char *)data + pos;
    lens[n++] = size - pos;

    char *out = NULL;
    size_t out_len = 0;
    int closes = 0;
    if (td__http_serve_pieces(pieces, lens, n, 256, handler, NULL, &out, &out_len, &closes) ==
        TD_OK) {
        /* a response always starts with a status line */
        if (out_len && memcmp(out, "HTTP/1.1 ", 9) != 0)
            abort();
        free(out);
    }
    return 0;
}
