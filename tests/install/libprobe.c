/* A program as a user of libboxkite writes it, built from an installed prefix with nothing but
 * `pkg-config --cflags --libs boxkite` (tests/install/test_1_pkgconfig.py builds it shared and
 * static). It checks what the header promises a caller, then prints the run-time version.
 *   usage: libprobe EXPECTED_VERSION */
#include <stdio.h>
#include <string.h>

#include <boxkite/boxkite.h>

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "libprobe: %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	bk_client *c = (bk_client *)&c; /* not NULL: bk_client_open must set it on failure too */
	bk_exec_result res;
	bk_file_info info;
	bk_process_output out;
	bk_status st;

	CHECK(argc == 2);
	/* The library loaded is the one installed with this header. */
	CHECK(strcmp(bk_version(), argv[1]) == 0);
	/* Sized to its content: its names are malloc'd (it held two 4 KiB arrays once); what is
	 * inline is fixed-size, the two 32-byte hashes included. */
	CHECK(sizeof(bk_file_info) <= 160);
	/* A bare path is not a URL, and the message says what one looks like. */
	CHECK(bk_client_open(&c, "/run/nonexistent/boxkited.sock", NULL, &st) == BK_INVALID_ARGUMENT);
	CHECK(c == NULL);
	CHECK(strstr(st.message, "ipc:///run/nonexistent/boxkited.sock") != NULL);
	/* Nobody listens there: UNAVAILABLE, nothing to free; st may be NULL. */
	CHECK(bk_client_open(&c, "ipc:///run/nonexistent/boxkited.sock", NULL, &st) == BK_UNAVAILABLE);
	CHECK(c == NULL);
	CHECK(bk_client_open(&c, "ipc:///run/nonexistent/boxkited.sock", NULL, NULL) == BK_UNAVAILABLE);
	/* Every free function takes NULL, and a result twice. */
	bk_client_close(NULL);
	bk_exec_result_free(NULL);
	bk_file_info_free(NULL);
	bk_file_list_free(NULL, 0);
	memset(&res, 0, sizeof(res));
	bk_exec_result_free(&res);
	bk_exec_result_free(&res);
	memset(&info, 0, sizeof(info));
	bk_file_info_free(&info);
	bk_process_output_free(NULL);
	bk_process_list_free(NULL, 0);
	memset(&out, 0, sizeof(out));
	bk_process_output_free(&out);
	bk_process_output_free(&out);
	CHECK(strcmp(bk_status_name(BK_UNAVAILABLE), "UNAVAILABLE") == 0);
	printf("libboxkite %s\n", bk_version());
	return 0;
}
