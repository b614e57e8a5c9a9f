/* The file transfer benchmark (make bench), run by bench/files.sh. Baselines measured in the same
 * run, on the same machine, just before the transfers they describe:
 *
 *   sha256  one core's SHA-256 rate (EVP, 4 MiB buffers, warm), as `openssl speed -evp sha256`
 *           measures it: the transfer targets are fractions of it, since the floor of an
 *           authenticated, integrity-checked transfer is one hash of every byte on each side;
 *   raw     nng REQ/REP moving SIZE bytes in 4 MiB messages — requests of 4 MiB answered by 8
 *           bytes (the upload direction) and 8-byte requests answered by 4 MiB (download) —
 *           against a rep0 thread of this process: the transport's own throughput;
 *   write   SIZE bytes written in 4 MiB pwrites to a new file beside the workspace (the page
 *           cache of the same filesystem): what an upload's server side and a download's client
 *           side cannot go faster than.
 *
 * Then bk_upload_fd of a SIZE-byte file to boxkited and bk_download_fd back (to a new file), over
 * the same transport, with the CPU time each side spent per GiB moved: the client's is this
 * process's (getrusage), the server's boxkited's front and executor's (/proc/PID/stat).
 *
 * Prints MiB/s, the ratios and the `bench:` lines of bench/bench.mk. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <openssl/evp.h>

#include "boxkite/boxkite.h"

#define CHUNK (4u << 20)
#define SMALL 8
#define MiB(bytes) ((double)(bytes) / (1 << 20))
#define GiB(bytes) ((double)(bytes) / (1 << 30))

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One core's SHA-256: 4 MiB at a time over a warm buffer for at least 1 s. MiB/s. */
static double sha256_rate(void)
{
	uint8_t *buf = malloc(CHUNK), out[32];
	uint64_t done = 0;
	double t0;

	if (!buf)
		return 0;
	memset(buf, 0x5a, CHUNK);
	EVP_Digest(buf, CHUNK, out, NULL, EVP_sha256(), NULL); /* warm-up */
	t0 = now_s();
	do {
		EVP_Digest(buf, CHUNK, out, NULL, EVP_sha256(), NULL);
		done += CHUNK;
	} while (now_s() - t0 < 1.0);
	free(buf);
	return MiB(done) / (now_s() - t0);
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
		*(dir == 0 ? up : down) = MiB(size) / (now_s() - t0);
	}
	nng_close(cli);
	nng_close(srv);
	pthread_join(t, NULL);
	return 0;
}

/* `size` bytes in 4 MiB pwrites to a new file at path (removed afterwards). MiB/s. */
static double write_rate(const char *path, uint64_t size)
{
	uint8_t *buf = malloc(CHUNK);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	double t0, rate = 0;

	if (buf && fd >= 0) {
		memset(buf, 0xa5, CHUNK);
		t0 = now_s();
		for (uint64_t off = 0; off < size; off += CHUNK)
			if (pwrite(fd, buf, CHUNK, (off_t)off) != (ssize_t)CHUNK)
				break;
		rate = MiB(size) / (now_s() - t0);
	}
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(buf);
	return rate;
}

/* CPU seconds (user + system) of this process. */
static double self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds of process pid from /proc/PID/stat (utime + stime, every thread), and its ppid. */
static double proc_cpu_s(pid_t pid, pid_t *ppid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	int parent = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &parent, &ut, &st) != 3)
		return 0;
	if (ppid)
		*ppid = parent;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of boxkited: its front (pid) and the front's children (the executor). */
static double server_cpu_s(pid_t pid)
{
	double total = proc_cpu_s(pid, NULL);
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		pid_t child = (pid_t)atoi(e->d_name), parent = 0;
		double cpu;

		if (child <= 0 || child == pid)
			continue;
		cpu = proc_cpu_s(child, &parent);
		if (parent == pid)
			total += cpu;
	}
	if (d)
		closedir(d);
	return total;
}

struct transfer {
	double mib_s;
	double client_s_per_gib, server_s_per_gib;
};

static int run_files(const char *url, const char *key_file, pid_t server, const char *src, const char *dst,
		     struct transfer *up, struct transfer *down)
{
	bk_client_options o = { .key_file = key_file, .timeout_ms = 120000 };
	bk_transfer_options t = { .overwrite = true };
	bk_file_info info;
	bk_client *c;
	bk_status st;
	double t0, c0, s0;
	int in, out;

	if (bk_client_open(&c, url, &o, &st) != BK_OK) {
		fprintf(stderr, "connect: %s\n", st.message);
		return 1;
	}
	in = open(src, O_RDONLY | O_CLOEXEC);
	c0 = self_cpu_s();
	s0 = server_cpu_s(server);
	t0 = now_s();
	if (in < 0 || bk_upload_fd(c, in, "bench.bin", &t, &info, NULL, &st) != BK_OK) {
		fprintf(stderr, "upload: %s\n", in < 0 ? strerror(errno) : st.message);
		return 1;
	}
	up->mib_s = MiB(info.size) / (now_s() - t0);
	up->client_s_per_gib = (self_cpu_s() - c0) / GiB(info.size);
	up->server_s_per_gib = (server_cpu_s(server) - s0) / GiB(info.size);
	bk_file_info_free(&info);
	close(in);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	c0 = self_cpu_s();
	s0 = server_cpu_s(server);
	t0 = now_s();
	if (out < 0 || bk_download_fd(c, "bench.bin", out, &t, &info, &st) != BK_OK) {
		fprintf(stderr, "download: %s\n", out < 0 ? strerror(errno) : st.message);
		return 1;
	}
	down->mib_s = MiB(info.size) / (now_s() - t0);
	down->client_s_per_gib = (self_cpu_s() - c0) / GiB(info.size);
	down->server_s_per_gib = (server_cpu_s(server) - s0) / GiB(info.size);
	bk_file_info_free(&info);
	close(out);
	bk_client_close(c);
	return 0;
}

static void report(const char *t, const char *dir, const struct transfer *x, double sha, double raw, double disk)
{
	printf("%-4s %-8s %7.1f MiB/s = %.2fx one-core SHA-256 (target 0.6x), %.2fx raw nng, %.2fx local write; "
	       "CPU per GiB: client %.2f s, server %.2f s\n",
	       t, dir, x->mib_s, x->mib_s / sha, x->mib_s / raw, x->mib_s / disk, x->client_s_per_gib,
	       x->server_s_per_gib);
	printf("bench: %s_%s %.1f MiB/s\nbench: %s_%s.ratio %.2f x\n", dir, t, x->mib_s, dir, t, x->mib_s / sha);
	printf("bench: %s_%s_vs_raw_nng %.2f x\nbench: %s_%s_vs_local_write %.2f x\n", dir, t, x->mib_s / raw, dir, t,
	       x->mib_s / disk);
	printf("bench: %s_%s_client_cpu %.2f s/GiB\nbench: %s_%s_server_cpu %.2f s/GiB\n", dir, t, x->client_s_per_gib,
	       dir, t, x->server_s_per_gib);
}

int main(int argc, char **argv)
{
	double sha, raw_up, raw_down, disk;
	struct transfer up, down;
	uint64_t size;
	pid_t server;

	if (argc != 10) {
		fprintf(stderr,
			"usage: files_bench NAME RAW_URL BOXKITED_URL KEYFILE BOXKITED_PID SRC DST WRITE_PATH SIZE\n");
		return 2;
	}
	server = (pid_t)atoi(argv[5]);
	size = strtoull(argv[9], NULL, 10);
	sha = sha256_rate();
	disk = write_rate(argv[8], size);
	if (sha <= 0 || disk <= 0 || run_raw(argv[2], size, &raw_up, &raw_down) ||
	    run_files(argv[3], argv[4], server, argv[6], argv[7], &up, &down))
		return 1;
	printf("%-4s one-core SHA-256 %.1f MiB/s; raw nng up %.1f, down %.1f MiB/s; local write %.1f MiB/s\n", argv[1],
	       sha, raw_up, raw_down, disk);
	printf("bench: sha256_one_core_%s %.1f MiB/s\nbench: raw_nng_up_%s %.1f MiB/s\nbench: raw_nng_down_%s %.1f MiB/s\n"
	       "bench: local_write_%s %.1f MiB/s\n",
	       argv[1], sha, argv[1], raw_up, argv[1], raw_down, argv[1], disk);
	report(argv[1], "upload", &up, sha, raw_up, disk);
	report(argv[1], "download", &down, sha, raw_down, disk);
	return 0;
}
