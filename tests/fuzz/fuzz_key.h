/* The key shared by the fuzz harness (which loads it into its server) and the corpus generator
 * (which MACs seeds with it). A fixed test key: seeds stay valid across runs and machines. */
#ifndef BK_FUZZ_KEY_H
#define BK_FUZZ_KEY_H

#define FUZZ_KEY_ID "fuzz"
#define FUZZ_KEY_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define FUZZ_KEY_FILE FUZZ_KEY_ID " " FUZZ_KEY_HEX "\n"

/* The harness's flag byte, the first byte of every input (see fuzz_envelope.c). */
enum fuzz_flag {
	FUZZ_RESEAL = 0x01,
	FUZZ_KEEP_TIME = 0x02,
	FUZZ_TWICE = 0x04,
	FUZZ_NO_ANSWERS = 0x08,
	FUZZ_CACHE_FULL = 0x10,
};

#endif
