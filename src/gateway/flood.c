/* flood.c - the per-connection refusal streak and the answer it earns
 * (flood.h): a client that honours Retry-After never reaches a streak, one
 * that retries at once waits what it was told to wait, then is closed. */
#include "gateway/flood.h"

#include <stddef.h>

#define MS 1000000ull

void td_flood_opts_default(td_flood_opts *o)
{
    o->tarpit_after = 3;
    o->close_after = 32;
    o->min_hold_ns = 50 * MS;
    o->max_hold_ns = 1000 * MS;
    o->slack_ns = 5 * MS;
}

td_flood_action td_flood_answer(const td_flood_opts *o, td_flood_conn *s, uint64_t arrived_ns,
                                uint32_t tenant, int refused, uint64_t retry_after_ns,
                                uint64_t now_ns, uint64_t *hold_ns)
{
    *hold_ns = 0;
    if (!refused) {
        s->streak = 0;
        s->retry_at_ns = 0;
        return TD_FLOOD_ANSWER;
    }
    int early = s->retry_at_ns && s->who == tenant && arrived_ns + o->slack_ns <= s->retry_at_ns;
    s->streak = early ? s->streak + (s->streak < UINT32_MAX) : 0;
    s->who = tenant;
    td_flood_action act = TD_FLOOD_ANSWER;
    if (o->tarpit_after && s->streak >= o->tarpit_after) {
        uint64_t h = retry_after_ns;
        if (h < o->min_hold_ns)
            h = o->min_hold_ns;
        if (h > o->max_hold_ns)
            h = o->max_hold_ns;
        *hold_ns = h;
        act = TD_FLOOD_HOLD;
    }
    if (o->close_after && s->streak >= o->close_after)
        act = TD_FLOOD_CLOSE;
    /* the client learns of the refusal when it is sent: its retry is due
     * retry_after_ns after that */
    s->retry_at_ns = now_ns + *hold_ns + retry_after_ns;
    return act;
}
