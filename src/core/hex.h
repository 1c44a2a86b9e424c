/* hex.h - the value of one hexadecimal digit, for the parsers that read
 * percent escapes, chunk sizes, JSON \u escapes and SHA-256 digests. */
#ifndef TENANTD_CORE_HEX_H
#define TENANTD_CORE_HEX_H

/* 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other byte. */
static inline int td_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
