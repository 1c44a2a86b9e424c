/* gpu.c - the simulated GPU: a fixed number of slots and a FIFO queue of
 * jobs waiting for one. Pure bookkeeping; the time a job holds its slot is
 * measured by the caller (server.c, with a uv timer). */
#include <assert.h>

#include "simmodel/simmodel.h"

void td_sim_gpu_init(td_sim_gpu *g, unsigned slots, size_t max_queue)
{
    assert(slots > 0);
    g->slots = slots;
    g->busy = 0;
    g->queued = 0;
    g->max_queue = max_queue;
    g->head = g->tail = NULL;
}

td_status td_sim_gpu_submit(td_sim_gpu *g, td_sim_job *job)
{
    assert(job->state == TD_SIM_JOB_IDLE);
    /* A free slot goes to a newcomer only when nobody waits: FIFO. */
    if (g->busy < g->slots && !g->head) {
        g->busy++;
        job->state = TD_SIM_JOB_RUNNING;
        return TD_OK;
    }
    if (g->queued >= g->max_queue)
        return TD_EAGAIN;
    job->next = NULL;
    job->prev = g->tail;
    if (g->tail)
        g->tail->next = job;
    else
        g->head = job;
    g->tail = job;
    g->queued++;
    job->state = TD_SIM_JOB_QUEUED;
    return TD_OK;
}

static void unlink_job(td_sim_gpu *g, td_sim_job *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        g->head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    else
        g->tail = job->prev;
    job->prev = job->next = NULL;
    g->queued--;
}

void td_sim_gpu_release(td_sim_gpu *g, td_sim_job *job)
{
    switch (job->state) {
    case TD_SIM_JOB_IDLE:
        return;
    case TD_SIM_JOB_QUEUED:
        unlink_job(g, job);
        job->state = TD_SIM_JOB_IDLE;
        return;
    case TD_SIM_JOB_RUNNING:
        assert(g->busy > 0);
        g->busy--;
        job->state = TD_SIM_JOB_IDLE;
        break;
    }
    while (g->busy < g->slots && g->head) {
        td_sim_job *next = g->head;
        unlink_job(g, next);
        g->busy++;
        next->state = TD_SIM_JOB_RUNNING;
        next->on_start(next);
    }
}
