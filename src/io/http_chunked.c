/* http_chunked.c - a strict check of chunked framing (RFC 9112 7.1) run
 * over a request body's raw bytes before http-parser sees them. The
 * library, built lenient, swallows a bare LF inside a chunk extension as
 * extension bytes and takes any two bytes for the CRLF after chunk data;
 * a proxy in front that reads the same bytes strictly would frame the
 * stream otherwise. What this accepts, http-parser reads the same way. */
#include <string.h>

#include "io/http_internal.h"
#include "core/hex.h"

enum {
    CK_SIZE_FIRST = 0, /* must be zero: td__chunked_init is a memset */
    CK_SIZE,
    CK_SIZE_BWS, /* BWS after the size: ";" or CR next */
    CK_NAME_BWS, /* after ";" */
    CK_NAME,
    CK_NAME_AFTER, /* BWS after a name: "=", ";" or CR */
    CK_VAL_BWS,    /* after "=" */
    CK_VAL_TOKEN,
    CK_VAL_QUOTED,
    CK_VAL_PAIR, /* after a backslash in a quoted-string */
    CK_VAL_AFTER,
    CK_SIZE_LF,
    CK_DATA,
    CK_DATA_CR,
    CK_DATA_LF,
    CK_TRAILER_START,
    CK_TRAILER_NAME,
    CK_TRAILER_VALUE,
    CK_TRAILER_LF,
    CK_END_LF,
    CK_DONE,
    CK_BAD,
};

static int tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int ws(unsigned char ch)
{
    return ch == ' ' || ch == '\t';
}

/* field-vchar, SP and HTAB: what a field value and a quoted-pair may hold */
static int value_char(unsigned char ch)
{
    return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

void td__chunked_init(td__chunked *ck)
{
    memset(ck, 0, sizeof *ck);
}

int td__chunked_scan(td__chunked *ck, const char *data, size_t n, size_t *used)
{
    size_t i = 0;
    int s = ck->state;
    while (i < n && s != CK_DONE && s != CK_BAD) {
        unsigned char ch = (unsigned char)data[i];
        if (s == CK_DATA) {
            size_t take = n - i < ck->left ? n - i : (size_t)ck->left;
            ck->left -= take;
            i += take;
            if (ck->left == 0)
                s = CK_DATA_CR;
            continue;
        }
        i++;
        if (s <= CK_VAL_AFTER && ++ck->line > TD_HTTP_CHUNK_LINE_MAX) {
            s = CK_BAD;
            break;
        }
        switch (s) {
        case CK_SIZE_FIRST:
            if (td_hexval(ch) < 0) {
                s = CK_BAD;
                break;
            }
            ck->left = (uint64_t)td_hexval(ch);
            s = CK_SIZE;
            break;
        case CK_SIZE:
            if (td_hexval(ch) >= 0) {
                /* 2^60 bytes is past any body limit; refusing there
                 * keeps the sum from wrapping */
                if (ck->left >> 56) {
                    s = CK_BAD;
                    break;
                }
                ck->left = ck->left * 16 + (uint64_t)td_hexval(ch);
            } else if (ws(ch)) {
                s = CK_SIZE_BWS;
            } else if (ch == ';') {
                s = CK_NAME_BWS;
            } else if (ch == '\r') {
                s = CK_SIZE_LF;
            } else {
                s = CK_BAD;
            }
            break;
        case CK_SIZE_BWS:
            s = ws(ch) ? CK_SIZE_BWS : ch == ';' ? CK_NAME_BWS : ch == '\r' ? CK_SIZE_LF : CK_BAD;
            break;
        case CK_NAME_BWS:
            s = ws(ch) ? CK_NAME_BWS : tchar(ch) ? CK_NAME : CK_BAD;
            break;
        case CK_NAME:
        case CK_NAME_AFTER:
            if (s == CK_NAME && tchar(ch))
                break;
            s = ws(ch)       ? CK_NAME_AFTER
                : ch == '='  ? CK_VAL_BWS
                : ch == ';'  ? CK_NAME_BWS
                : ch == '\r' ? CK_SIZE_LF
                             : CK_BAD;
            break;
        case CK_VAL_BWS:
            s = ws(ch) ? CK_VAL_BWS : tchar(ch) ? CK_VAL_TOKEN : ch == '"' ? CK_VAL_QUOTED : CK_BAD;
            break;
        case CK_VAL_TOKEN:
        case CK_VAL_AFTER:
            if (s == CK_VAL_TOKEN && tchar(ch))
                break;
            s = ws(ch) ? CK_VAL_AFTER : ch == ';' ? CK_NAME_BWS : ch == '\r' ? CK_SIZE_LF : CK_BAD;
            break;
        case CK_VAL_QUOTED:
            /* qdtext, or a backslash; no CR, LF or other control byte */
            s = ch == '"' ? CK_VAL_AFTER : ch == '\\' ? CK_VAL_PAIR : value_char(ch) ? s : CK_BAD;
            break;
        case CK_VAL_PAIR:
            s = value_char(ch) ? CK_VAL_QUOTED : CK_BAD;
            break;
        case CK_SIZE_LF:
            if (ch != '\n') {
                s = CK_BAD;
                break;
            }
            ck->line = 0;
            s = ck->left ? CK_DATA : CK_TRAILER_START;
            break;
        case CK_DATA_CR:
            s = ch == '\r' ? CK_DATA_LF : CK_BAD;
            break;
        case CK_DATA_LF:
            s = ch == '\n' ? CK_SIZE_FIRST : CK_BAD;
            break;
        case CK_TRAILER_START:
            /* a blank line ends the message; a line starting with
             * whitespace would be obs-fold, refused as in a header */
            s = ch == '\r' ? CK_END_LF : tchar(ch) ? CK_TRAILER_NAME : CK_BAD;
            break;
        case CK_TRAILER_NAME:
            s = tchar(ch) ? s : ch == ':' ? CK_TRAILER_VALUE : CK_BAD;
            break;
        case CK_TRAILER_VALUE:
            s = ch == '\r' ? CK_TRAILER_LF : value_char(ch) ? s : CK_BAD;
            break;
        case CK_TRAILER_LF:
            s = ch == '\n' ? CK_TRAILER_START : CK_BAD;
            break;
        case CK_END_LF:
            s = ch == '\n' ? CK_DONE : CK_BAD;
            break;
        default:
            s = CK_BAD;
            break;
        }
    }
    ck->state = s;
    *used = i;
    if (s == CK_BAD)
        return -1;
    return s == CK_DONE;
}
