/* The server's keys, reloadable while it serves: a reload swaps in a new keyring, and calls in
 * flight keep the one they started with until they end. A key file that fails to parse leaves
 * the current keys in place. */
#ifndef BK_KEYSTORE_H
#define BK_KEYSTORE_H

#include <stdbool.h>

#include "keys.h"

typedef struct bk_keystore bk_keystore;
typedef struct bk_keyring_ref bk_keyring_ref;

/* path NULL: a store with no keys (every keyed call is refused AUTH_NOT_CONFIGURED). claim: the
 * keys it reads are a warm pool's claim key: until a keyring is pinned, every reference to them
 * says so (bk_keyring_ref_claim), and the pipeline serves them Health and Reset only. */
int bk_keystore_open(const char *path, bool claim, bk_keystore **out, bk_error **err);
/* A store holding the keys of environment variable `name` (key-file text, as a Kubernetes
 * secretKeyRef injects it), never reloaded. The variable is removed from the environment and its
 * bytes overwritten. */
int bk_keystore_open_env(const char *name, bool claim, bk_keystore **out, bk_error **err);
void bk_keystore_free(bk_keystore *ks);

/* How later reloads open the key file: open(arg, path) returns a descriptor or -errno. boxkited's
 * front, which runs as a user that may not read the file, has the executor open it. */
typedef int (*bk_key_file_opener)(void *arg, const char *path);
void bk_keystore_set_opener(bk_keystore *ks, bk_key_file_opener open, void *arg);

/* Re-read the file if it changed since the last load (or always, with force). Returns 1 when a
 * new keyring was installed, 0 when nothing changed, <0 with *err when the file is bad. */
int bk_keystore_reload(bk_keystore *ks, bool force, bk_error **err);

/* Make ring (taken) the store's keyring for good: later reloads read no key file. A Reset's
 * tenant key (server/session/reset.c). 0, or -ENOMEM with *err set (ring freed, the keys unchanged). */
int bk_keystore_pin(bk_keystore *ks, bk_keyring *ring, bk_error **err);

/* Take a reference to the current keyring; NULL when no keys are configured. */
bk_keyring_ref *bk_keystore_get(bk_keystore *ks);
const bk_keyring *bk_keyring_ref_ring(const bk_keyring_ref *ref);
/* The reference is to a warm pool's claim key: a call made with it may do Health and Reset only. */
bool bk_keyring_ref_claim(const bk_keyring_ref *ref);
void bk_keyring_ref_put(bk_keyring_ref *ref);

bool bk_keystore_configured(bk_keystore *ks);

#endif
