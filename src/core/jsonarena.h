/* jsonarena.h - request-scoped memory for jansson: while an arena is open
 * on a thread, every jansson allocation of that thread is carved from it
 * and freeing is a no-op; closing it releases everything at once (nginx's
 * and h2o's per-request pools). Other threads, and a thread with no arena
 * open, use malloc/free as before. */
#ifndef TENANTD_JSONARENA_H
#define TENANTD_JSONARENA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Points jansson's allocator at the arena-aware functions. Call once, at
 * start-up, before other threads use jansson. Values allocated before it
 * are still freed correctly afterwards. */
void td_json_arena_install(void);

/* Opens an arena on this thread (false, and nothing changes, when none
 * could be had or td_json_arena_install was not called; jansson then uses
 * malloc). Every json_t made while it is open must be released, and no
 * string from one kept, before td_json_arena_end: memory it hands out is
 * not valid afterwards. Arenas do not nest. */
bool td_json_arena_begin(void);

/* Closes this thread's arena: all its memory is recycled for the next
 * request (at most two chunks of 1 MiB stay allocated between requests). */
void td_json_arena_end(void);

/* Gives up the caller's reference to v without walking it when an arena
 * is open (its memory, large blocks included, goes with the arena; a walk
 * of a parsed review was 3% of the webhook), json_decref(v) otherwise. Only
 * for a value made entirely while this arena is open and holding no
 * reference to anything made outside it (a parse's tree, once nothing else
 * refers to its nodes): a reference it held would never be released. */
void td_json_arena_forget(json_t *v);

/* Frees the memory this thread keeps for its arenas (at thread or
 * program exit; an arena may be opened again afterwards). */
void td_json_arena_release(void);

/* Frees memory that jansson handed out (json_dumps' string): a no-op for
 * the open arena's, free() for the rest. */
void td_json_free(void *p);

/* Bytes handed out by this thread's open arena (0 if none): for tests. */
size_t td_json_arena_used(void);

#endif
