/* http_multi.c - one HTTP address served by several libuv loops: the
 * caller's and N-1 threads', each with its own SO_REUSEPORT listener,
 * connections and TLS context. Requests the caller marks as answerable
 * anywhere (the admission webhook, health checks) are answered where they
 * were read; every other one is copied to the caller's loop, answered there
 * by the same handler as with one loop, and its response is handed back.
 *
 * Why SO_REUSEPORT and not one listening fd watched by every loop: libuv
 * has no supported way to share one listener between loops (a fd opened
 * into several loops wakes them all, and its accept()s race), and the
 * gateway's workers already do it this way. The kernel hashes connections
 * over the sockets, so a few connections may land unevenly.
 *
 * Hand-over: a locked queue per direction and uv_async_send. The
 * connection is kept allocated while its request is out (http_server.c's
 * refs and zombies) and reads nothing meanwhile; a loop that stops takes
 * no more answers (closed under the lock), and answers still on their way
 * are dropped by the caller's loop.
 *
 * Preparing (o->prepare): a request whose handler needs work done first
 * (tenantd parses a YAML body: up to seconds for 3 MiB) is copied and its
 * connection deferred on the loop that read it, whichever, the caller's
 * too; a prepare thread does the work and queues the job for the caller's
 * loop as a hand-over; so the work never holds up a loop's other
 * connections (health checks, webhook reviews, other tenants' requests)
 * nor the caller's loop. */
#include "io/http_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "io/http_internal.h"

typedef struct job job;
struct job {
    job *next;
    unsigned owner; /* index of the loop whose connection asked */
    int prepared;   /* went through a prepare thread: req.prepared is its result */
    td__http_later *later;
    td_http_request req; /* copied: points into this allocation */
    td_http_response resp;
    char *content_type, *extra_headers; /* copies of the handler's borrowed strings */
};

typedef struct {
    td_http_multi *m;
    unsigned index;
    uv_loop_t own_loop; /* threads' loops (index > 0) */
    int own_loop_ok;
    uv_loop_t *loop;
    td_http_server *srv;
    /* index 0: jobs for the caller's loop; index > 0: answers back, or stop */
    uv_async_t async;
    int async_ok;
    pthread_t thread;
    int thread_started;
    job *answers, **answers_tail; /* under m->mu */
    int stop_asked;               /* under m->mu */
    int closed;                   /* under m->mu: takes no answer any more */
} mloop;

struct td_http_multi {
    td_http_multi_opts o;
    unsigned n;
    mloop *loops;
    int port;
    pthread_mutex_t mu;
    job *jobs, **jobs_tail; /* under mu */
    int stopping;           /* under mu */
    /* prepare threads and their queue */
    pthread_t *prep;
    unsigned nprep, prep_started;
    pthread_cond_t prep_cv;
    int prep_cv_ok;
    job *prep_q, **prep_tail; /* under mu */
    int open;               /* handles of the caller's loop not yet closed */
    void (*done)(void *);
    void *done_arg;
};

static void free_job(td_http_multi *m, job *j)
{
    if (!j)
        return;
    if (j->prepared && j->req.prepared && m->o.release)
        m->o.release(j->req.prepared, m->o.user);
    free(j->resp.body);
    free(j->content_type);
    free(j->extra_headers);
    free(j);
}

/* One allocation holding the request and every string it points to. */
static job *copy_request(const td_http_request *r)
{
    size_t ml = strlen(r->method) + 1, pl = strlen(r->path) + 1, ql = strlen(r->query) + 1;
    size_t size = sizeof(job) + r->n_headers * sizeof(td_http_header_field) + ml + pl + ql +
                  r->body_len + 1;
    for (size_t i = 0; i < r->n_headers; i++)
        size += strlen(r->headers[i].name) + strlen(r->headers[i].value) + 2;
    job *j = calloc(1, size);
    if (!j)
        return NULL;
    td_http_header_field *f = (td_http_header_field *)(j + 1);
    char *p = (char *)(f + r->n_headers);
#define PUT(dst, src, len) (memcpy(p, (src), (len)), (dst) = p, p += (len))
    PUT(j->req.method, r->method, ml);
    PUT(j->req.path, r->path, pl);
    PUT(j->req.query, r->query, ql);
    for (size_t i = 0; i < r->n_headers; i++) {
        PUT(f[i].name, r->headers[i].name, strlen(r->headers[i].name) + 1);
        PUT(f[i].value, r->headers[i].value, strlen(r->headers[i].value) + 1);
    }
#undef PUT
    memcpy(p, r->body, r->body_len);
    p[r->body_len] = '\0';
    j->req.body = p;
    j->req.body_len = r->body_len;
    j->req.headers = f;
    j->req.n_headers = r->n_headers;
    j->req.version_major = r->version_major;
    j->req.version_minor = r->version_minor;
    return j;
}

static void reply_503(td_http_response *resp, const char *text)
{
    resp->status = 503;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = strdup(text);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

/* Every loop's td_http_handler. */
static void on_request(const td_http_request *req, td_http_response *resp, void *user)
{
    mloop *l = user;
    td_http_multi *m = l->m;
    if (m->o.anywhere && m->o.anywhere(req, m->o.user)) {
        m->o.handler(req, resp, m->o.user);
        return;
    }
    int prep = m->o.prepare && (!m->o.wants_prepare || m->o.wants_prepare(req, m->o.user));
    if (l->index == 0 && !prep) {
        m->o.handler(req, resp, m->o.user);
        return;
    }
    job *j = copy_request(req);
    if (!j) {
        reply_503(resp, "out of memory\n");
        return;
    }
    j->owner = l->index;
    pthread_mutex_lock(&m->mu);
    if (m->stopping) {
        pthread_mutex_unlock(&m->mu);
        free_job(m, j);
        reply_503(resp, "shutting down\n");
        return;
    }
    j->later = td__http_server_defer(l->srv);
    if (!j->later) { /* not called from the server's dispatch: cannot happen */
        pthread_mutex_unlock(&m->mu);
        free_job(m, j);
        reply_503(resp, "cannot hand the request over\n");
        return;
    }
    if (prep) {
        j->prepared = 1;
        *m->prep_tail = j;
        m->prep_tail = &j->next;
        pthread_cond_signal(&m->prep_cv);
        pthread_mutex_unlock(&m->mu);
        return;
    }
    *m->jobs_tail = j;
    m->jobs_tail = &j->next;
    pthread_mutex_unlock(&m->mu);
    uv_async_send(&m->loops[0].async);
}

/* A prepare thread: prepares the queued requests one at a time and hands
 * each to the caller's loop. */
static void *prep_main(void *arg)
{
    td_http_multi *m = arg;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        while (!m->stopping && !m->prep_q)
            pthread_cond_wait(&m->prep_cv, &m->mu);
        if (m->stopping)
            break;
        job *j = m->prep_q;
        m->prep_q = j->next;
        if (!m->prep_q)
            m->prep_tail = &m->prep_q;
        j->next = NULL;
        pthread_mutex_unlock(&m->mu);
        j->req.prepared = m->o.prepare(&j->req, m->o.user);
        pthread_mutex_lock(&m->mu);
        if (m->stopping) { /* its connection goes with its server */
            free_job(m, j);
            break;
        }
        *m->jobs_tail = j;
        m->jobs_tail = &j->next;
        /* the caller's async is closed only once this thread is joined
         * (stop_threads), so it is open here */
        uv_async_send(&m->loops[0].async);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* On the caller's loop: j's answer r (its body taken over) to j's
 * connection, on its own loop; j is then freed (here or there). */
static void deliver(td_http_multi *m, job *j, td_http_response r)
{
    if (j->prepared && j->req.prepared && m->o.release)
        m->o.release(j->req.prepared, m->o.user);
    j->req.prepared = NULL;
    if (j->owner == 0) {
        /* a request of the caller's own loop, prepared on a thread:
         * answered here (the content type and headers are copied out
         * at once); not once the handler has stopped the servers */
        pthread_mutex_lock(&m->mu);
        int stopping = m->stopping;
        pthread_mutex_unlock(&m->mu);
        if (stopping)
            free(r.body);
        else
            td__http_later_resume(j->later, &r); /* takes the body */
        free_job(m, j);
        return;
    }
    j->resp = r;
    /* borrowed until the handler returned: copied for the other loop */
    if (r.content_type && !(j->content_type = strdup(r.content_type)))
        j->resp.status = 500;
    if (r.extra_headers && !(j->extra_headers = strdup(r.extra_headers)))
        j->resp.status = 500;
    j->resp.content_type = j->content_type;
    j->resp.extra_headers = j->extra_headers;
    mloop *ow = &m->loops[j->owner];
    pthread_mutex_lock(&m->mu);
    int closed = ow->closed;
    if (!closed) {
        *ow->answers_tail = j;
        ow->answers_tail = &j->next;
        uv_async_send(&ow->async); /* under the lock: see stop_threads */
    }
    pthread_mutex_unlock(&m->mu);
    if (closed)
        free_job(m, j);
}

/* The jobs of list (n of them) answered together by o.handle_batch, each
 * delivered once it returned: 0, or -1 out of memory (then list is
 * untouched, for one at a time). */
static int answer_batch(td_http_multi *m, job *list, size_t n)
{
    const td_http_request **reqs = malloc(n * sizeof *reqs);
    td_http_response *resps = calloc(n, sizeof *resps);
    job **jobs = malloc(n * sizeof *jobs);
    if (!reqs || !resps || !jobs) {
        free(reqs);
        free(resps);
        free(jobs);
        return -1;
    }
    size_t k = 0;
    for (job *j = list; j; j = j->next, k++) {
        jobs[k] = j;
        reqs[k] = &j->req;
    }
    m->o.handle_batch(reqs, resps, n, m->o.user);
    for (k = 0; k < n; k++) {
        jobs[k]->next = NULL;
        deliver(m, jobs[k], resps[k]);
    }
    free(reqs);
    free(resps);
    free(jobs);
    return 0;
}

/* On the caller's loop: answers the requests handed over (a turn's
 * together when o.handle_batch says how), and hands each answer back to
 * its connection's loop. */
static void on_jobs(uv_async_t *a)
{
    td_http_multi *m = a->data;
    pthread_mutex_lock(&m->mu);
    job *list = m->jobs;
    m->jobs = NULL;
    m->jobs_tail = &m->jobs;
    pthread_mutex_unlock(&m->mu);
    size_t n = 0;
    for (job *j = list; j; j = j->next)
        n++;
    if (n > 1 && m->o.handle_batch && answer_batch(m, list, n) == 0)
        return;
    while (list) {
        job *j = list;
        list = j->next;
        j->next = NULL;
        td_http_response r = {0};
        m->o.handler(&j->req, &r, m->o.user);
        deliver(m, j, r);
    }
}

static void on_thread_server_stopped(void *arg)
{
    (void)arg; /* the loop ends once its async handle is closed too */
}

/* On a thread's loop: answers to write, or the order to stop. */
static void on_answers(uv_async_t *a)
{
    mloop *l = a->data;
    td_http_multi *m = l->m;
    pthread_mutex_lock(&m->mu);
    job *list = l->answers;
    l->answers = NULL;
    l->answers_tail = &l->answers;
    int stop = l->stop_asked && !l->closed;
    if (stop)
        l->closed = 1;
    pthread_mutex_unlock(&m->mu);
    while (list) {
        job *j = list;
        list = j->next;
        if (stop) {
            td__http_later_resume(j->later, NULL);
        } else {
            td__http_later_resume(j->later, &j->resp); /* takes the body */
            j->resp.body = NULL;
        }
        free_job(m, j);
    }
    if (stop) {
        td_http_server_stop(l->srv, on_thread_server_stopped, l);
        l->srv = NULL;
        uv_close((uv_handle_t *)&l->async, NULL);
    }
}

static void *thread_main(void *arg)
{
    mloop *l = arg;
    uv_run(&l->own_loop, UV_RUN_DEFAULT);
    uv_loop_close(&l->own_loop);
    l->own_loop_ok = 0;
    if (l->m->o.thread_exit)
        l->m->o.thread_exit(l->m->o.user);
    return NULL;
}

static void free_multi(td_http_multi *m)
{
    while (m->jobs) {
        job *j = m->jobs;
        m->jobs = j->next;
        free_job(m, j);
    }
    for (unsigned i = 0; i < m->n; i++) {
        while (m->loops[i].answers) {
            job *j = m->loops[i].answers;
            m->loops[i].answers = j->next;
            free_job(m, j);
        }
    }
    if (m->prep_cv_ok)
        pthread_cond_destroy(&m->prep_cv);
    pthread_mutex_destroy(&m->mu);
    free(m->prep);
    free(m->loops);
    free(m);
}

static void caller_handle_closed(td_http_multi *m)
{
    if (--m->open > 0)
        return;
    void (*done)(void *) = m->done;
    void *arg = m->done_arg;
    free_multi(m);
    if (done)
        done(arg);
}

static void on_main_server_stopped(void *arg)
{
    caller_handle_closed(arg);
}

static void on_main_async_closed(uv_handle_t *h)
{
    caller_handle_closed(h->data);
}

/* Ends the threads' loops (those running: by their async; the others
 * here) and joins them. */
static void stop_threads(td_http_multi *m)
{
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    for (unsigned i = 1; i < m->n; i++)
        m->loops[i].stop_asked = 1;
    if (m->prep_cv_ok)
        pthread_cond_broadcast(&m->prep_cv);
    pthread_mutex_unlock(&m->mu);
    /* a prepare under way is finished (a parse: bounded, at most seconds)
     * and dropped; those queued are dropped with their connections */
    for (unsigned i = 0; i < m->prep_started; i++)
        pthread_join(m->prep[i], NULL);
    m->prep_started = 0;
    while (m->prep_q) {
        job *j = m->prep_q;
        m->prep_q = j->next;
        free_job(m, j);
    }
    m->prep_tail = &m->prep_q;
    for (unsigned i = 1; i < m->n; i++) {
        mloop *l = &m->loops[i];
        if (l->thread_started) {
            /* a thread woken for an answer may have seen stop_asked already
             * and be closing its loop: wake it only while it is not closed
             * (it closes under the lock) */
            pthread_mutex_lock(&m->mu);
            if (!l->closed)
                uv_async_send(&l->async);
            pthread_mutex_unlock(&m->mu);
            pthread_join(l->thread, NULL);
            l->thread_started = 0;
        } else if (l->own_loop_ok) {
            if (l->async_ok)
                on_answers(&l->async);
            else if (l->srv)
                td_http_server_stop(l->srv, NULL, NULL);
            uv_run(&l->own_loop, UV_RUN_DEFAULT);
            uv_loop_close(&l->own_loop);
            l->own_loop_ok = 0;
        }
    }
}

void td_http_multi_stop(td_http_multi *m, void (*done)(void *), void *arg)
{
    if (!m)
        return;
    stop_threads(m);
    m->done = done;
    m->done_arg = arg;
    /* jobs still queued belong to connections that are gone: free_multi */
    m->open = 2;
    td_http_server_stop(m->loops[0].srv, on_main_server_stopped, m);
    uv_close((uv_handle_t *)&m->loops[0].async, on_main_async_closed);
}

int td_http_multi_port(const td_http_multi *m)
{
    return m ? m->port : 0;
}

static td_status probe_port(const char *addr, td_err *err)
{
    struct sockaddr_storage ss;
    socklen_t alen = 0;
    td_status st = td__listen_addr_parse(addr, &ss, &alen, err);
    if (st != TD_OK)
        return st;
    int port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                        : ((struct sockaddr_in *)&ss)->sin_port;
    if (port == 0)
        return TD_OK;
    /* SO_REUSEPORT would let a second tenantd share the port silently; a
     * socket bound without it fails if anyone holds the port. */
    int probe = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (probe >= 0)
        setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (probe < 0 || bind(probe, (struct sockaddr *)&ss, alen) < 0) {
        int e = errno;
        if (probe >= 0)
            close(probe);
        return td_err_set(err, TD_EIO, "cannot listen on %s: %s", addr, strerror(e));
    }
    close(probe);
    return TD_OK;
}

td_status td_http_multi_start(uv_loop_t *loop, const char *addr, const td_http_multi_opts *o,
                              td_http_multi **out, td_err *err)
{
    if (!loop || !o || !o->handler || !out)
        return td_err_set(err, TD_EINVAL, "td_http_multi_start: loop, handler and out needed");
    if (o->loops < 1 || o->loops > TD_HTTP_MAX_LOOPS)
        return td_err_set(err, TD_EINVAL, "admin threads must be from 1 to %u", TD_HTTP_MAX_LOOPS);
    td_status st = o->loops > 1 ? probe_port(addr, err) : TD_OK;
    if (st != TD_OK)
        return st;
    td_http_multi *m = calloc(1, sizeof *m);
    if (m && !(m->loops = calloc(o->loops, sizeof *m->loops))) {
        free(m);
        m = NULL;
    }
    if (!m || pthread_mutex_init(&m->mu, NULL) != 0) {
        if (m)
            free(m->loops);
        free(m);
        return td_err_set(err, TD_ENOMEM, "out of memory starting the server on %s", addr);
    }
    m->o = *o;
    m->o.tls = NULL; /* each server keeps its own reference */
    m->n = o->loops;
    m->jobs_tail = &m->jobs;
    m->prep_tail = &m->prep_q;
    if (o->prepare) {
        m->nprep = o->prepare_threads ? o->prepare_threads : 2;
        if (m->nprep > TD_HTTP_MAX_LOOPS)
            m->nprep = TD_HTTP_MAX_LOOPS;
        m->prep = calloc(m->nprep, sizeof *m->prep);
        m->prep_cv_ok = m->prep && pthread_cond_init(&m->prep_cv, NULL) == 0;
        if (!m->prep_cv_ok) {
            free_multi(m);
            return td_err_set(err, TD_ENOMEM, "out of memory starting the server on %s", addr);
        }
    }
    for (unsigned i = 0; i < m->n; i++) {
        mloop *l = &m->loops[i];
        l->m = m;
        l->index = i;
        l->answers_tail = &l->answers;
        l->async.data = l;
    }
    int reuse = m->n > 1;
    /* the threads' servers first: until their threads run, a failure is
     * undone here, on their own loops */
    for (unsigned i = 1; st == TD_OK && i < m->n; i++) {
        mloop *l = &m->loops[i];
        if (uv_loop_init(&l->own_loop) < 0) {
            st = td_err_set(err, TD_EIO, "admin thread %u: cannot create its event loop", i);
            break;
        }
        l->own_loop_ok = 1;
        l->loop = &l->own_loop;
        st = td__http_server_start_ex(l->loop, addr, m->port, reuse, o->tls ? o->tls[i] : NULL,
                                      o->max_body, on_request, l, &l->srv, err);
        if (st == TD_OK) {
            if (!m->port)
                m->port = td_http_server_port(l->srv);
            if (uv_async_init(l->loop, &l->async, on_answers) < 0)
                st = td_err_set(err, TD_EIO, "admin thread %u: cannot create its wake-up", i);
            else
                l->async_ok = 1;
        }
    }
    mloop *l0 = &m->loops[0];
    l0->loop = loop;
    if (st == TD_OK)
        st = td__http_server_start_ex(loop, addr, m->port, reuse, o->tls ? o->tls[0] : NULL,
                                      o->max_body, on_request, l0, &l0->srv, err);
    if (st != TD_OK) {
        stop_threads(m);
        free_multi(m);
        return st;
    }
    m->port = td_http_server_port(l0->srv);
    uv_async_init(loop, &l0->async, on_jobs);
    l0->async.data = m;
    l0->async_ok = 1;
    /* signals stay with the caller's thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 1; i < m->n; i++) {
        mloop *l = &m->loops[i];
        if (pthread_create(&l->thread, NULL, thread_main, l) != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            td_http_multi_stop(m, NULL, NULL); /* freed when the caller's loop runs */
            return td_err_set(err, TD_EIO, "cannot start admin thread %u", i);
        }
        l->thread_started = 1;
    }
    for (unsigned i = 0; i < m->nprep; i++) {
        if (pthread_create(&m->prep[i], NULL, prep_main, m) != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            td_http_multi_stop(m, NULL, NULL);
            return td_err_set(err, TD_EIO, "cannot start prepare thread %u", i);
        }
        m->prep_started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = m;
    return TD_OK;
}
