/* The door of the two HTTP listeners (--http-listen, --preview-listen): one thread per listener
 * accepts connections and reads each request's head, and hands a whole head to the listener's
 * handler; what a handler answers, the door writes and then closes the connection.
 *
 * Anyone who reaches a listener may connect, so what the door holds is bounded, whatever they do:
 * at most BK_DOOR_MAX connections at once, each with at most BK_DOOR_HEAD_MAX bytes of a head, for
 * at most BK_DOOR_WAIT_MS from its accept to its head (and as long again to take its answer).
 * When a listener is full, its oldest connection is closed for the new one: a flood cannot keep a
 * client out, which is served as soon as its head is in — typically within a millisecond of its
 * connect, long before the flood refills the door. Before, ~1 000 idle connections to
 * --http-listen used every descriptor and boxkited stopped, and 64 connections that never
 * finished their head held every preview relay. */
#ifndef BK_DOOR_H
#define BK_DOOR_H

#include <stddef.h>

#include "error.h"

#define BK_DOOR_MAX 256
#define BK_DOOR_HEAD_MAX (16 * 1024)
#define BK_DOOR_WAIT_MS 10000

typedef struct bk_door bk_door;

/* A request whose head arrived. head is the request line and headers with the blank line that
 * ends them (head_len bytes); rest the bytes that came after it (a body's start). */
typedef struct bk_door_request {
	int fd;
	const char *head;
	size_t head_len;
	const char *rest;
	size_t rest_len;
	const char *peer;       /* the client's address, numeric */
} bk_door_request;

/* The listener's handler, on the door's thread: it must not block. It either answers — sets
 * *answer to malloc'd bytes (a whole HTTP response, *len long) that the door sends before
 * closing — and returns 0; or takes the connection (the descriptor is its own from then on, and
 * it copies what of the request it needs) and returns 1. */
typedef int (*bk_door_fn)(void *arg, const bk_door_request *req, char **answer, size_t *len);

/* Listen on url ("http://HOST:PORT", HOST numeric; `flag` names the setting in messages) and
 * serve on a thread of its own. */
int bk_door_open(const char *url, const char *flag, bk_door_fn fn, void *arg, bk_door **out, bk_error **err);
/* Stop: no handler runs after it returns; the connections still at the door are closed. */
void bk_door_close(bk_door *door);

/* A whole response with a plain-text body (malloc'd into *out, *len): for handlers. 0 or -ENOMEM. */
int bk_door_response(int code, const char *reason, const char *type, const char *body, size_t body_len, char **out,
		     size_t *len);

#endif
