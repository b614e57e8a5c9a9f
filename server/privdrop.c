/* The front gives up every privilege once the executor is forked: capability sets (effective,
 * permitted, inheritable, ambient) emptied, the bounding set emptied so no exec can bring
 * anything back, securebits locked so uid 0 means nothing special to the kernel, and
 * no_new_privs. A parser bug in the front then yields an unprivileged process. */
#include "privdrop.h"

#include <errno.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

int bk_drop_all_privileges(bk_error **err)
{
	cap_t caps = cap_get_proc();
	cap_flag_value_t setpcap = CAP_CLEAR;
	int ret = 0;

	if (!caps)
		return bk_error_errno(err, errno, "cap_get_proc");
	cap_get_flag(caps, CAP_SETPCAP, CAP_EFFECTIVE, &setpcap);
	cap_free(caps);

	if (setpcap == CAP_SET) {
		/* Lock uid 0 out of capability rules: no caps on exec, none kept across setuid. */
		unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
				SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
				SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
		if (cap_set_secbits(bits) < 0)
			return bk_error_errno(err, errno, "cannot lock securebits");
		for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
			if (CAP_IS_SUPPORTED(c) && cap_drop_bound(c) < 0)
				return bk_error_errno(err, errno, "cannot drop capability %d from the bounding set", c);
	}
	if (cap_reset_ambient() < 0 && errno != EINVAL)
		return bk_error_errno(err, errno, "cannot clear ambient capabilities");
	caps = cap_init();
	if (!caps)
		return bk_error_errno(err, errno, "cap_init");
	if (cap_set_proc(caps) < 0)
		ret = bk_error_errno(err, errno, "cannot clear capability sets");
	cap_free(caps);
	if (ret == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		ret = bk_error_errno(err, errno, "cannot set no_new_privs");
	return ret;
}
