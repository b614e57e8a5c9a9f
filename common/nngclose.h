/* A close of an nng socket that cannot hang its caller.
 *
 * libnng 1.5.2 (Debian's) can hang nng_close() for ever. Its TCP and IPC transports re-arm a
 * receive from the receive callback (tcptran_pipe_recv_cb, ipc_pipe_recv_cb: a partial read, or a
 * message's header read and its body to come) without checking whether the pipe was closed
 * meanwhile. When the pipe's close (p->closed = true, then nni_aio_close(rxaio)) lands between
 * the callback's start and that re-arm, nng_stream_recv() finds the rx aio stopped and returns
 * without completing anything, so the protocol's receive waiting on the pipe is never finished;
 * stopping that pipe (nni_aio_stop on its receive aio, on nng's reaper thread) then waits for it
 * for ever, the reaper with it, and nng_close() — which waits for the socket's pipes to be
 * reaped — never returns. nng fixed the TCP side after 1.5.2 (upstream #1636, "Finish receive
 * aio on close"). It needs a close while a message is arriving: boxkited stopping with clients
 * mid-request (about 2 stops in 40 after its executor died), bkctl exiting while an answer
 * arrived (about 1 exit in 200).
 *
 * The socket is closed on a thread of its own; the caller waits ms at most. */
#ifndef BK_NNGCLOSE_H
#define BK_NNGCLOSE_H

#include <nng/nng.h>

/* 0 when nng_close(s) returned within ms; -ETIMEDOUT when it did not (it goes on, on its own
 * thread: nothing of the socket may be freed, and the process should end rather than wait for
 * nng — nng_fini would hang the same way). */
int bk_nng_close(nng_socket s, int ms);

#endif
