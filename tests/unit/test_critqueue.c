/* test_critqueue.c - critqueue.c: start up to capacity, FIFO within a class,
 * most critical first, shedding the lowest class and within it the tenant
 * furthest over its weighted share, the same-class rule, deadline refusal
 * from the service-time EWMA, expired pops and cancel. Ends with a seeded
 * random run checked step by step against a brute-force model of the rule
 * in critqueue.c's header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/critqueue.h"

#define MS   1000000ULL
#define WALL 1700000000123456789ULL /* a CLOCK_REALTIME-sized now */

#define CP TD_CRIT_CRITICAL_PLUS
#define C  TD_CRIT_CRITICAL
#define SP TD_CRIT_SHEDDABLE_PLUS
#define S  TD_CRIT_SHEDDABLE

static int reqs[4096]; /* &reqs[i] is request i */
#define REQ(i) ((void *)&reqs[i])
#define ID(p)  ((int)((int *)(p)-reqs))

static td_critqueue *make(uint32_t capacity, uint32_t queue_max)
{
    td_critqueue *q = NULL;
    assert_int_equal(td_critqueue_create(capacity, queue_max, &q), TD_OK);
    return q;
}

static td_cq_outcome offer_full(td_critqueue *q, int id, td_criticality crit, uint32_t tenant,
                                double weight, uint64_t deadline, uint64_t now, int *evicted_id)
{
    td_cq_item it = {REQ(id), crit, tenant, weight, deadline, 0}, ev;
    bool had = true;
    td_cq_outcome o = td_critqueue_offer(q, &it, now, &ev, &had);
    *evicted_id = had ? ID(ev.req) : -1;
    return o;
}

static td_cq_outcome offer(td_critqueue *q, int id, td_criticality crit, uint32_t tenant)
{
    int ev;
    td_cq_outcome o = offer_full(q, id, crit, tenant, 1, 0, 0, &ev);
    assert_int_equal(ev, -1);
    return o;
}

/* Finishes one in-flight request of tenant and pops the next to start:
 * its id, or -1. */
static int finish_and_next(td_critqueue *q, uint32_t tenant)
{
    td_cq_item it;
    td_critqueue_done_tenant(q, tenant, MS);
    return td_critqueue_next(q, 0, &it) == 1 ? ID(it.req) : -1;
}

static void test_criticality_names(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        td_status st;
        td_criticality want;
    } rows[] = {
        {"critical_plus", TD_OK, CP},
        {"CRITICAL_PLUS", TD_OK, CP},
        {"critical-plus", TD_OK, CP},
        {"Critical", TD_OK, C},
        {"sheddable_plus", TD_OK, SP},
        {"Sheddable-Plus", TD_OK, SP},
        {"sheddable", TD_OK, S},
        {"", TD_EINVAL, 0},
        {"critical_", TD_EINVAL, 0},
        {"criticalplus", TD_EINVAL, 0},
        {"sheddable_plus_plus_plus", TD_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_criticality c = S;
        td_status st = td_criticality_parse(rows[i].in, &c);
        if (st != rows[i].st || (st == TD_OK && c != rows[i].want))
            fail_msg("'%s': status %d crit %d", rows[i].in, st, c);
    }
    assert_int_equal(td_criticality_parse(NULL, &(td_criticality){0}), TD_EINVAL);
    assert_string_equal(td_criticality_name(CP), "critical_plus");
    assert_string_equal(td_criticality_name(SP), "sheddable_plus");
    assert_string_equal(td_criticality_name((td_criticality)9), "unknown");
}

/* A pool that grows and shrinks: the capacity follows, within what the
 * queue was made for; growing lets queued requests start on the next pop,
 * shrinking lets those in flight finish and starts none until under it. */
static void test_set_capacity(void **state)
{
    (void)state;
    td_critqueue *q = make(4, 8);
    assert_int_equal(td_critqueue_set_capacity(q, 0), TD_EINVAL);
    assert_int_equal(td_critqueue_set_capacity(q, 5), TD_EINVAL);
    assert_int_equal(td_critqueue_set_capacity(q, 1), TD_OK);
    static const struct {
        int op;       /* 0 offer, 1 set capacity, 2 finish one and pop */
        uint32_t arg; /* request id or capacity */
        int want;     /* outcome, or the id started (-1 none) */
    } rows[] = {
        {0, 1, TD_CQ_START}, {0, 2, TD_CQ_QUEUED}, {0, 3, TD_CQ_QUEUED}, {0, 4, TD_CQ_QUEUED},
        {1, 3, 0},  /* grown: two start at the next pops */
        {2, 0, 2},  /* 1 finished: 2 starts, and 3 as well below */
        {1, 1, 0},  /* shrunk under the 2 in flight */
        {2, 0, -1}, /* one finished: still 1 in flight, at capacity */
        {2, 0, 4},  /* none in flight: 4 starts */
    };
    td_cq_item it;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int got;
        if (rows[i].op == 0)
            got = offer(q, (int)rows[i].arg, S, 7);
        else if (rows[i].op == 1)
            got = td_critqueue_set_capacity(q, rows[i].arg);
        else
            got = finish_and_next(q, 7);
        if (got != rows[i].want)
            fail_msg("row %zu: got %d, want %d", i, got, rows[i].want);
        if (i == 5) /* the second free slot of the grown capacity */
            assert_int_equal(td_critqueue_next(q, 0, &it) == 1 ? ID(it.req) : -1, 3);
    }
    td_critqueue_destroy(q);
}

static void test_create_invalid(void **state)
{
    (void)state;
    td_critqueue *q = NULL;
    assert_int_equal(td_critqueue_create(0, 4, &q), TD_EINVAL);
    q = make(1, 0); /* no waiting room: busy means shed */
    assert_int_equal(offer(q, 1, S, 1), TD_CQ_START);
    assert_int_equal(offer(q, 2, CP, 1), TD_CQ_SHED);
    td_critqueue_destroy(q);
    td_critqueue_destroy(NULL);
}

static void test_start_until_capacity_then_queue(void **state)
{
    (void)state;
    td_critqueue *q = make(2, 3);
    static const struct {
        int id;
        td_criticality crit;
        td_cq_outcome want;
    } rows[] = {
        {1, S, TD_CQ_START},  {2, C, TD_CQ_START},  {3, S, TD_CQ_QUEUED},
        {4, S, TD_CQ_QUEUED}, {5, S, TD_CQ_QUEUED}, {6, S, TD_CQ_SHED},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (offer(q, rows[i].id, rows[i].crit, 7) != rows[i].want)
            fail_msg("offer %d: unexpected outcome", rows[i].id);
    assert_int_equal(td_critqueue_inflight(q), 2);
    assert_int_equal(td_critqueue_depth(q, S), 3);
    assert_int_equal(td_critqueue_depth(q, C), 0);
    assert_int_equal(td_critqueue_depth(q, (td_criticality)7), 0);
    td_cq_item it;
    assert_int_equal(td_critqueue_next(q, 0, &it), 0); /* no free slot */
    assert_int_equal(finish_and_next(q, 7), 3);
    assert_int_equal(td_critqueue_inflight(q), 2);
    td_critqueue_destroy(q);
}

static void test_order_most_critical_first_fifo_within(void **state)
{
    (void)state;
    td_critqueue *q = make(1, 16);
    assert_int_equal(offer(q, 100, C, 1), TD_CQ_START);
    static const struct {
        int id;
        td_criticality crit;
        uint32_t tenant;
    } arrivals[] = {{1, S, 1},  {2, SP, 2}, {3, C, 3},  {4, S, 2},
                    {5, CP, 1}, {6, C, 1},  {7, SP, 3}, {8, CP, 2}};
    for (size_t i = 0; i < sizeof arrivals / sizeof arrivals[0]; i++)
        assert_int_equal(offer(q, arrivals[i].id, arrivals[i].crit, arrivals[i].tenant),
                         TD_CQ_QUEUED);
    static const int want[] = {5, 8, 3, 6, 2, 7, 1, 4};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int got = finish_and_next(q, 1);
        if (got != want[i])
            fail_msg("pop %zu: got %d, want %d", i, got, want[i]);
    }
    assert_int_equal(finish_and_next(q, 1), -1);
    assert_int_equal(td_critqueue_inflight(q), 0);
    /* A free slot with only less critical work queued: a critical arrival
     * starts at once; a sheddable one queues behind what waits. */
    q = (td_critqueue_destroy(q), make(1, 4));
    assert_int_equal(offer(q, 1, C, 1), TD_CQ_START);
    assert_int_equal(offer(q, 2, S, 1), TD_CQ_QUEUED);
    td_critqueue_done_tenant(q, 1, MS); /* slot free, 2 not yet handed out */
    assert_int_equal(offer(q, 3, S, 1), TD_CQ_QUEUED);
    assert_int_equal(offer(q, 4, C, 1), TD_CQ_START);
    td_critqueue_destroy(q);
}

/* Shedding when full: each row fills a queue (capacity 1 busy, queue_max
 * items), offers one more and says what happens. Items are "crit:tenant"
 * pairs; weights per tenant from the row. */
typedef struct {
    td_criticality crit;
    uint32_t tenant;
} qi;

static void test_shedding(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct {
        const char *name;
        double weights[4];    /* of tenants 0..3 */
        uint32_t busy_tenant; /* owns the one in-flight request */
        qi queued[6];         /* ids 1.., in order */
        int nqueued;
        qi arrival;           /* id 50 */
        td_cq_outcome want;
        int evicted;          /* id or -1 */
    } rows[] = {
        {"critical evicts the newest sheddable", {1, 1, 1, 1}, 3,
         {{S, 0}, {S, 0}, {S, 0}}, 3, {C, 1}, TD_CQ_QUEUED, 3},
        {"lowest class goes first", {1, 1, 1, 1}, 3,
         {{S, 0}, {SP, 0}, {S, 0}, {SP, 1}}, 4, {CP, 1}, TD_CQ_QUEUED, 3},
        {"then the next lowest", {1, 1, 1, 1}, 3,
         {{C, 0}, {SP, 0}, {SP, 1}, {C, 1}}, 4, {CP, 2}, TD_CQ_QUEUED, 3},
        {"sheddable_plus evicts sheddable", {1, 1, 1, 1}, 3,
         {{S, 0}, {C, 0}}, 2, {SP, 1}, TD_CQ_QUEUED, 1},
        {"nothing less critical: shed the arrival", {1, 1, 1, 1}, 3,
         {{C, 0}, {CP, 1}, {C, 0}}, 3, {S, 1}, TD_CQ_SHED, -1},
        {"only more critical queued", {1, 1, 1, 1}, 3,
         {{CP, 0}, {CP, 1}}, 2, {C, 2}, TD_CQ_SHED, -1},
        {"victim is the tenant most over its share", {1, 1, 1, 1}, 3,
         {{S, 0}, {S, 1}, {S, 1}, {S, 0}, {S, 1}}, 5, {C, 2}, TD_CQ_QUEUED, 5},
        {"weight protects a heavy tenant", {1, 4, 1, 1}, 3,
         {{S, 0}, {S, 1}, {S, 1}, {S, 0}, {S, 1}}, 5, {C, 2}, TD_CQ_QUEUED, 4},
        {"in-flight counts towards the share", {1, 1, 1, 1}, 0,
         {{S, 0}, {S, 1}, {S, 0}, {S, 1}}, 4, {C, 2}, TD_CQ_QUEUED, 3},
        {"tie: the newest item of the tied tenants", {1, 1, 1, 1}, 3,
         {{S, 0}, {S, 1}, {S, 1}, {S, 0}}, 4, {C, 2}, TD_CQ_QUEUED, 4},
        {"same class: from a tenant further over", {1, 1, 1, 1}, 3,
         {{C, 0}, {C, 0}, {C, 0}, {C, 1}}, 4, {C, 1}, TD_CQ_QUEUED, 3},
        {"same class: not from an equal tenant", {1, 1, 1, 1}, 3,
         {{C, 0}, {C, 0}, {C, 1}, {C, 1}}, 4, {C, 1}, TD_CQ_SHED, -1},
        {"same class: the +1 prevents ping-pong", {1, 1, 1, 1}, 3,
         {{C, 0}, {C, 0}, {C, 0}, {C, 1}, {C, 1}}, 5, {C, 1}, TD_CQ_SHED, -1},
        {"same class: never from oneself", {1, 1, 1, 1}, 3,
         {{C, 0}, {C, 0}, {C, 0}}, 3, {C, 0}, TD_CQ_SHED, -1},
        {"same class: equal weights, even after the swap", {1, 1, 1, 1}, 3,
         {{C, 1}, {C, 1}, {C, 0}}, 3, {C, 0}, TD_CQ_SHED, -1},
        {"same class: a heavy arrival may evict", {4, 1, 1, 1}, 3,
         {{C, 1}, {C, 1}, {C, 0}}, 3, {C, 0}, TD_CQ_QUEUED, 2},
        {"same class: a light tenant is further over", {1, 1, 1, 0.25}, 3,
         {{C, 0}, {C, 0}, {C, 3}}, 3, {C, 0}, TD_CQ_QUEUED, 3},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_critqueue *q = make(1, (uint32_t)rows[i].nqueued);
        int ev;
        uint32_t bt = rows[i].busy_tenant;
        assert_int_equal(offer_full(q, 99, CP, bt, rows[i].weights[bt], 0, 0, &ev), TD_CQ_START);
        for (int k = 0; k < rows[i].nqueued; k++) {
            const qi *x = &rows[i].queued[k];
            if (offer_full(q, k + 1, x->crit, x->tenant, rows[i].weights[x->tenant], 0, 0, &ev) !=
                TD_CQ_QUEUED)
                fail_msg("%s: item %d not queued", rows[i].name, k + 1);
        }
        const qi *a = &rows[i].arrival;
        td_cq_outcome o =
            offer_full(q, 50, a->crit, a->tenant, rows[i].weights[a->tenant], 0, 0, &ev);
        if (o != rows[i].want || ev != rows[i].evicted)
            fail_msg("%s: outcome %d evicted %d, want %d evicted %d", rows[i].name, o, ev,
                     rows[i].want, rows[i].evicted);
        uint32_t total = 0;
        for (int c = 0; c < TD_CRIT_COUNT; c++)
            total += td_critqueue_depth(q, (td_criticality)c);
        assert_int_equal(total, (uint32_t)rows[i].nqueued);
        td_critqueue_destroy(q);
    }
}

static void test_no_eviction_without_room_for_victim(void **state)
{
    (void)state;
    td_critqueue *q = make(1, 1);
    assert_int_equal(offer(q, 1, S, 0), TD_CQ_START);
    assert_int_equal(offer(q, 2, S, 0), TD_CQ_QUEUED);
    td_cq_item it = {REQ(3), CP, 1, 1, 0, 0};
    assert_int_equal(td_critqueue_offer(q, &it, 0, NULL, NULL), TD_CQ_SHED);
    assert_int_equal(td_critqueue_depth(q, S), 1);
    td_critqueue_destroy(q);
}

static void test_deadline(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint64_t service[3]; /* done() samples, 0 = none */
        int ahead;           /* queued critical_plus items before the arrival */
        uint64_t now, deadline;
        td_cq_outcome want;
    } rows[] = {
        {"no estimate yet", {0}, 5, 0, 1, TD_CQ_QUEUED},
        {"passed already, even with a slot", {0}, -1, 10, 10, TD_CQ_DEADLINE},
        {"free slot starts", {100 * MS}, -1, 0, 1, TD_CQ_START},
        {"one round fits exactly", {100 * MS}, 0, 0, 100 * MS, TD_CQ_QUEUED},
        {"one round does not fit", {100 * MS}, 0, 0, 100 * MS - 1, TD_CQ_DEADLINE},
        {"capacity-1 ahead: still one round", {100 * MS}, 1, 0, 100 * MS, TD_CQ_QUEUED},
        {"capacity ahead: two rounds", {100 * MS}, 2, 0, 200 * MS - 1, TD_CQ_DEADLINE},
        {"capacity ahead: two rounds fit", {100 * MS}, 2, 5, 200 * MS + 5, TD_CQ_QUEUED},
        {"5 ahead: three rounds", {100 * MS}, 5, 0, 300 * MS, TD_CQ_QUEUED},
        {"5 ahead: three rounds, 1 ns short", {100 * MS}, 5, 0, 300 * MS - 1, TD_CQ_DEADLINE},
        /* 100 then 180: 100 + (180 - 100) / 8 = 110 */
        {"EWMA of two samples", {100 * MS, 180 * MS}, 0, 0, 110 * MS, TD_CQ_QUEUED},
        {"EWMA of two samples, short", {100 * MS, 180 * MS}, 0, 0, 110 * MS - 1, TD_CQ_DEADLINE},
        {"no deadline", {100 * MS}, 5, 0, 0, TD_CQ_QUEUED},
        {"wall-clock scale, fits", {100 * MS}, 0, WALL, WALL + 100 * MS, TD_CQ_QUEUED},
        {"wall-clock scale, 1 ns short", {100 * MS}, 0, WALL, WALL + 100 * MS - 1, TD_CQ_DEADLINE},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_critqueue *q = make(2, 16);
        int ev, id = 1;
        /* Feed the samples through started requests. */
        for (int k = 0; k < 3 && rows[i].service[k]; k++) {
            assert_int_equal(offer(q, id++, CP, 0), TD_CQ_START);
            td_critqueue_done_tenant(q, 0, rows[i].service[k]);
        }
        if (rows[i].ahead >= 0) {
            assert_int_equal(offer(q, id++, CP, 0), TD_CQ_START);
            assert_int_equal(offer(q, id++, CP, 0), TD_CQ_START);
            for (int k = 0; k < rows[i].ahead; k++)
                assert_int_equal(offer(q, id++, CP, 0), TD_CQ_QUEUED);
        }
        /* A sheddable item queued does not count against a critical one. */
        if (rows[i].ahead >= 0)
            assert_int_equal(offer(q, id++, S, 0), TD_CQ_QUEUED);
        td_cq_outcome o = offer_full(q, 500, CP, 1, 1, rows[i].deadline, rows[i].now, &ev);
        if (o != rows[i].want)
            fail_msg("%s: outcome %d, want %d", rows[i].name, o, rows[i].want);
        td_critqueue_destroy(q);
    }
}

static void test_expired_pop(void **state)
{
    (void)state;
    td_critqueue *q = make(1, 8);
    int ev;
    td_cq_item it;
    assert_int_equal(offer(q, 1, C, 0), TD_CQ_START);
    assert_int_equal(offer_full(q, 2, C, 0, 1, 50 * MS, 0, &ev), TD_CQ_QUEUED);
    assert_int_equal(offer_full(q, 3, C, 0, 1, 0, 0, &ev), TD_CQ_QUEUED);
    assert_int_equal(offer_full(q, 4, S, 1, 1, 20 * MS, 10 * MS, &ev), TD_CQ_QUEUED);
    assert_int_equal(offer_full(q, 5, S, 1, 1, 500 * MS, 0, &ev), TD_CQ_QUEUED);
    /* At 60 ms, with no free slot: the expired heads come out, as 2. */
    assert_int_equal(td_critqueue_next(q, 60 * MS, &it), 2);
    assert_int_equal(ID(it.req), 2);
    assert_int_equal(td_critqueue_next(q, 60 * MS, &it), 2);
    assert_int_equal(ID(it.req), 4);
    assert_true(it.enqueued_ns == 10 * MS);
    assert_int_equal(td_critqueue_next(q, 60 * MS, &it), 0);
    assert_int_equal(td_critqueue_inflight(q), 1);
    td_critqueue_done_tenant(q, 0, MS);
    assert_int_equal(td_critqueue_next(q, 60 * MS, &it), 1);
    assert_int_equal(ID(it.req), 3);
    td_critqueue_done_tenant(q, 0, MS);
    /* Exactly at its deadline is too late. */
    assert_int_equal(td_critqueue_next(q, 500 * MS, &it), 2);
    assert_int_equal(ID(it.req), 5);
    assert_int_equal(td_critqueue_next(q, 500 * MS, &it), 0);
    assert_int_equal(td_critqueue_depth(q, C) + td_critqueue_depth(q, S), 0);
    td_critqueue_destroy(q);
}

static void test_cancel(void **state)
{
    (void)state;
    td_critqueue *q = make(1, 8);
    assert_int_equal(offer(q, 1, C, 0), TD_CQ_START);
    for (int id = 2; id <= 6; id++)
        assert_int_equal(offer(q, id, C, (uint32_t)id % 2), TD_CQ_QUEUED);
    assert_true(td_critqueue_cancel(q, REQ(4)));
    assert_false(td_critqueue_cancel(q, REQ(4)));
    assert_false(td_critqueue_cancel(q, REQ(1))); /* in flight, not queued */
    assert_false(td_critqueue_cancel(q, REQ(77)));
    assert_true(td_critqueue_cancel(q, REQ(2)));
    assert_int_equal(td_critqueue_depth(q, C), 3);
    static const int want[] = {3, 5, 6, -1};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(finish_and_next(q, 0), want[i]);
    td_critqueue_destroy(q);
}

static void test_plain_done_stops_counting_inflight(void **state)
{
    (void)state;
    /* Tenant 0 has 2 in flight and 1 queued, tenant 1 has 2 queued. With
     * in-flight counted tenant 0 (3) is further over; after a plain done
     * only queued items count and tenant 1 (2) is. */
    for (int plain = 0; plain <= 1; plain++) {
        td_critqueue *q = make(3, 3);
        int ev;
        assert_int_equal(offer(q, 1, C, 0), TD_CQ_START);
        assert_int_equal(offer(q, 2, C, 0), TD_CQ_START);
        assert_int_equal(offer(q, 3, C, 9), TD_CQ_START);
        if (plain)
            td_critqueue_done(q, MS);
        else
            td_critqueue_done_tenant(q, 9, MS);
        assert_int_equal(offer(q, 4, C, 9), TD_CQ_START);
        assert_int_equal(offer(q, 5, S, 0), TD_CQ_QUEUED);
        assert_int_equal(offer(q, 6, S, 1), TD_CQ_QUEUED);
        assert_int_equal(offer(q, 7, S, 1), TD_CQ_QUEUED);
        assert_int_equal(offer_full(q, 8, C, 2, 1, 0, 0, &ev), TD_CQ_QUEUED);
        assert_int_equal(ev, plain ? 7 : 5);
        td_critqueue_destroy(q);
    }
}

/* ---- random run against a brute-force model ---- */

#define NT 6
static const double model_weight[NT] = {1, 2, 0.5, 1, 3, 1};

typedef struct {
    int id;
    int crit;
    uint32_t tenant;
    uint64_t seq;
} mitem;

typedef struct {
    mitem q[64];
    int n;
    uint32_t cap, qmax, inflight;
    uint32_t tinflight[NT];
    uint32_t running[256]; /* tenants of requests in flight */
    uint64_t seq;
} model;

static double mshare(const model *m, uint32_t t)
{
    uint32_t queued = 0;
    for (int i = 0; i < m->n; i++)
        queued += m->q[i].tenant == t;
    return (double)(queued + m->tinflight[t]) / model_weight[t];
}

/* Index in m->q of the victim for an arrival, or -1. */
static int mvictim(const model *m, int crit, uint32_t tenant)
{
    int lowest = -1;
    for (int i = 0; i < m->n; i++)
        if (m->q[i].crit > lowest)
            lowest = m->q[i].crit;
    if (lowest < crit)
        return -1;
    int best = -1;
    double best_share = 0;
    for (uint32_t t = 0; t < NT; t++) {
        int newest = -1;
        for (int i = 0; i < m->n; i++)
            if (m->q[i].tenant == t && m->q[i].crit == lowest)
                newest = i;
        if (newest < 0)
            continue;
        double s = mshare(m, t);
        if (best < 0 || s > best_share || (s == best_share && m->q[newest].seq > m->q[best].seq)) {
            best = newest;
            best_share = s;
        }
    }
    if (lowest == crit) {
        uint32_t queued = 0;
        for (int i = 0; i < m->n; i++)
            queued += m->q[i].tenant == tenant;
        if (m->q[best].tenant == tenant ||
            !(best_share > (double)(queued + m->tinflight[tenant] + 1) / model_weight[tenant]))
            return -1;
    }
    return best;
}

static void mstart(model *m, uint32_t t)
{
    m->running[m->inflight++] = t;
    m->tinflight[t]++;
}

static void test_random_against_model(void **state)
{
    (void)state;
    int evicted_lower = 0, evicted_same = 0, shed = 0;
    srand(12345);
    for (int round = 0; round < 20; round++) {
        model m = {0};
        m.cap = 1 + (uint32_t)(rand() % 4);
        m.qmax = (uint32_t)(rand() % 12);
        td_critqueue *q = make(m.cap, m.qmax);
        int next_id = 0;
        for (int step = 0; step < 3000; step++) {
            int op = rand() % 10;
            if (op < 5 && next_id < 4000) {
                int id = next_id++, crit = rand() % 4, ev;
                uint32_t t = (uint32_t)(rand() % NT);
                td_cq_outcome o =
                    offer_full(q, id, (td_criticality)crit, t, model_weight[t], 0, 0, &ev);
                int ahead = 0, want_ev = -1;
                for (int i = 0; i < m.n; i++)
                    ahead += m.q[i].crit <= crit;
                td_cq_outcome want;
                if (m.inflight < m.cap && ahead == 0) {
                    want = TD_CQ_START;
                    mstart(&m, t);
                } else if ((uint32_t)m.n < m.qmax) {
                    want = TD_CQ_QUEUED;
                    m.q[m.n++] = (mitem){id, crit, t, m.seq++};
                } else {
                    int v = mvictim(&m, crit, t);
                    want = v < 0 ? TD_CQ_SHED : TD_CQ_QUEUED;
                    shed += v < 0;
                    if (v >= 0) {
                        want_ev = m.q[v].id;
                        if (m.q[v].crit == crit)
                            evicted_same++;
                        else
                            evicted_lower++;
                        memmove(&m.q[v], &m.q[v + 1], (size_t)(m.n - v - 1) * sizeof m.q[0]);
                        m.n--;
                        m.q[m.n++] = (mitem){id, crit, t, m.seq++};
                    }
                }
                if (o != want || ev != want_ev)
                    fail_msg("round %d step %d: offer %d got %d/%d want %d/%d", round, step, id, o,
                             ev, want, want_ev);
            } else if (op < 8 && m.inflight > 0) {
                uint32_t k = (uint32_t)rand() % m.inflight, t = m.running[k];
                m.running[k] = m.running[--m.inflight];
                m.tinflight[t]--;
                td_critqueue_done_tenant(q, t, MS);
                td_cq_item it;
                int r = td_critqueue_next(q, 0, &it), want_id = -1;
                if (m.n > 0) {
                    int best = 0;
                    for (int i = 1; i < m.n; i++)
                        if (m.q[i].crit < m.q[best].crit)
                            best = i;
                    want_id = m.q[best].id;
                    mstart(&m, m.q[best].tenant);
                    memmove(&m.q[best], &m.q[best + 1], (size_t)(m.n - best - 1) * sizeof m.q[0]);
                    m.n--;
                }
                if ((r == 1 ? ID(it.req) : -1) != want_id)
                    fail_msg("round %d step %d: next got %d want %d", round, step,
                             r == 1 ? ID(it.req) : -1, want_id);
            } else if (m.n > 0) {
                int k = rand() % m.n;
                assert_true(td_critqueue_cancel(q, REQ(m.q[k].id)));
                memmove(&m.q[k], &m.q[k + 1], (size_t)(m.n - k - 1) * sizeof m.q[0]);
                m.n--;
            }
            uint32_t depth = 0;
            for (int c = 0; c < TD_CRIT_COUNT; c++)
                depth += td_critqueue_depth(q, (td_criticality)c);
            assert_int_equal(depth, (uint32_t)m.n);
            assert_int_equal(td_critqueue_inflight(q), m.inflight);
        }
        td_critqueue_destroy(q);
    }
    /* The run exercised every branch of the rule. */
    assert_true(evicted_lower > 100 && evicted_same > 100 && shed > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_criticality_names),
        cmocka_unit_test(test_create_invalid),
        cmocka_unit_test(test_start_until_capacity_then_queue),
        cmocka_unit_test(test_order_most_critical_first_fifo_within),
        cmocka_unit_test(test_shedding),
        cmocka_unit_test(test_no_eviction_without_room_for_victim),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_expired_pop),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_set_capacity),
        cmocka_unit_test(test_plain_done_stops_counting_inflight),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
