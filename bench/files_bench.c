/* The file transfer benchmark (make bench), run by bench/files.sh:
 *
 *   raw     nng REQ/REP moving SIZE bytes in 4 MiB messages — requests of 4 MiB answered by 8
 *           bytes (the upload direction) and 8-byte requests answered by 4 MiB (download) —
 *           against a rep0 thread of this process: the transport's own throughput;
 *   upload  bk_upload_fd of a SIZE-byte file to boxkited, then bk_download_fd back (to a
 *           file), over the same transport.
 *
 * Prints MiB/s, the ratios to raw, and the `bench:` lines of bench/bench.mk. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "boxkite/boxkite.h"

#define CHUNK (4u << 20)
#define SMALL 8

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The raw server: answers a big request with SMALL bytes and a small one with CHUNK bytes. */
static void *raw_server(void *arg)
{
	nng_socket *sock = arg;
	nng_msg *msg;

	while (nng_recvmsg(*sock, &msg, 0) == 0) {
		size_t want = nng_msg_len(msg) > SMALL ? SMALL : CHUNK;
		nng_msg_realloc(msg, want);
		if (nng_sendmsg(*sock, msg, 0) != 0)
			nng_msg_free(msg);
	}
	return NULL;
}

/* Move `size` bytes each way through plain nng; MiB/s up and down. */
static int run_raw(const char *url, uint64_t size, double *up, double *down)
{
	nng_socket srv, cli;
	pthread_t t;
	double t0;
	int rv;

	if ((rv = nng_rep0_open(&srv)) || (rv = nng_socket_set_size(srv, NNG_OPT_RECVMAXSZ, 2 * CHUNK)) ||
	    (rv = nng_listen(srv, url, NULL, 0)) || (rv = nng_req0_open(&cli)) ||
	    (rv = nng_socket_set_size(cli, NNG_OPT_RECVMAXSZ, 2 * CHUNK)) || (rv = nng_dial(cli, url, NULL, 0))) {
		fprintf(stderr, "raw %s: %s\n", url, nng_strerror(rv));
		return 1;
	}
	pthread_create(&t, NULL, raw_server, &srv);
	for (int dir = 0; dir < 2; dir++) {
		t0 = now_s();
		for (uint64_t done = 0; done < size; done += CHUNK) {
			nng_msg *m;
			nng_msg_alloc(&m, dir == 0 ? CHUNK : SMALL);
			if (dir == 0)
				memset(nng_msg_body(m), (int)done, 64); /* touch it, as a real sender would */
			if ((rv = nng_sendmsg(cli, m, 0)) || (rv = nng_recvmsg(cli, &m, 0))) {
				fprintf(stderr, "raw %s: %s\n", url, nng_strerror(rv));
				return 1;
			}
			nng_msg_free(m);
		}
		*(dir == 0 ? up : down) = (double)size / (1 << 20) / (now_s() - t0);
	}
	nng_close(cli);
	nng_close(srv);
	pthread_join(t, NULL);
	return 0;
}

static int run_files(const char *url, const char *key_file, const char *src, const char *dst, double *up,
		     double *down)
{
	bk_client_options o = { .key_file = key_file, .timeout_ms = 120000 };
	bk_transfer_options t = { .overwrite = true };
	bk_file_info info;
	bk_client *c;
	bk_status st;
	int in, out;
	double t0;

	if (bk_client_open(&c, url, &o, &st) != BK_OK) {
		fprintf(stderr, "connect: %s\n", st.message);
		return 1;
	}
	in = open(src, O_RDONLY | O_CLOEXEC);
	t0 = now_s();
	if (in < 0 || bk_upload_fd(c, in, "bench.bin", &t, &info, NULL, &st) != BK_OK) {
		fprintf(stderr, "upload: %s\n", in < 0 ? strerror(errno) : st.message);
		return 1;
	}
	*up = (double)info.size / (1 << 20) / (now_s() - t0);
	bk_file_info_free(&info);
	close(in);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	t0 = now_s();
	if (out < 0 || bk_download_fd(c, "bench.bin", out, &t, &info, &st) != BK_OK) {
		fprintf(stderr, "download: %s\n", out < 0 ? strerror(errno) : st.message);
		return 1;
	}
	*down = (double)info.size / (1 << 20) / (now_s() - t0);
	bk_file_info_free(&info);
	close(out);
	bk_client_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	double raw_up, raw_down, up, down;
	uint64_t size;

	if (argc != 8) {
		fprintf(stderr, "usage: files_bench NAME RAW_URL BOXKITED_URL KEYFILE SRC DST SIZE\n");
		return 2;
	}
	size = strtoull(argv[7], NULL, 10);
	if (run_raw(argv[2], size, &raw_up, &raw_down) || run_files(argv[3], argv[4], argv[5], argv[6], &up, &down))
		return 1;
	printf("%-4s raw nng: up %7.1f MiB/s, down %7.1f MiB/s | boxkite: upload %7.1f MiB/s (%.2fx), download %7.1f MiB/s (%.2fx)\n",
	       argv[1], raw_up, raw_down, up, up / raw_up, down, down / raw_down);
	printf("bench: raw_nng_up_%s %.1f MiB/s\nbench: raw_nng_down_%s %.1f MiB/s\n", argv[1], raw_up, argv[1], raw_down);
	printf("bench: upload_%s %.1f MiB/s\nbench: upload_%s.ratio %.2f x\n", argv[1], up, argv[1], up / raw_up);
	printf("bench: download_%s %.1f MiB/s\nbench: download_%s.ratio %.2f x\n", argv[1], down, argv[1],
	       down / raw_down);
	return 0;
}
