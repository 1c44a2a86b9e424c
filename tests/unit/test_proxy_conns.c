/* test_proxy_conns.c - what the gateway's per-address cap on
 * unauthenticated connections counts as one client (proxy_conns.c):
 * an IPv4 address, the same address IPv4-mapped, an IPv6 /64. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>

#include "io/proxy_internal.h"

static void key_of(const char *addr, uint8_t key[16])
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, addr, &a->sin_addr), 1);
    }
    px_addr_key((struct sockaddr *)&ss, key);
}

static const struct {
    const char *name, *a, *b;
    int same;
} rows[] = {
    {"one IPv4 address", "192.0.2.7", "192.0.2.7", 1},
    {"IPv4 neighbours are apart", "192.0.2.7", "192.0.2.8", 0},
    {"IPv4-mapped is the IPv4 address", "192.0.2.7", "::ffff:192.0.2.7", 1},
    {"IPv4-mapped neighbours are apart", "::ffff:192.0.2.7", "::ffff:192.0.2.8", 0},
    {"one IPv6 /64", "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe", 1},
    {"the next /64 is apart", "2001:db8:1:2::1", "2001:db8:1:3::1", 0},
    {"IPv6 loopback", "::1", "::1", 1},
    {"an IPv6 address that ends like an IPv4 one", "::c000:207", "192.0.2.7", 0},
};

static void test_addr_key_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint8_t ka[16], kb[16];
        print_message("row: %s\n", rows[i].name);
        key_of(rows[i].a, ka);
        key_of(rows[i].b, kb);
        assert_int_equal(memcmp(ka, kb, 16) == 0, rows[i].same);
    }
    /* an unknown peer: one key of zeros, not garbage */
    uint8_t k[16], zero[16] = {0};
    memset(k, 0xaa, sizeof k);
    px_addr_key(NULL, k);
    assert_memory_equal(k, zero, 16);
    struct sockaddr su = {.sa_family = AF_UNIX};
    memset(k, 0xaa, sizeof k);
    px_addr_key(&su, k);
    assert_memory_equal(k, zero, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr_key_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
