/* The front parses network input, so it holds nothing a parser bug could use: no capability
 * and no file-owning identity. Two steps, because an ipc:// socket is made in a directory only
 * root may write (and a tcp:// port below 1024 needs CAP_NET_BIND_SERVICE), and because nng's
 * threads exist once a listener does:
 *
 * bk_privileges_narrow(), before any thread: the bounding set emptied so no exec can bring
 * anything back, the ambient and inheritable sets cleared, securebits locked so that uid 0 gets
 * no capabilities on exec and leaving uid 0 clears them (the "setuid fixup", locked on),
 * no_new_privs; in the permitted and effective sets only CAP_SETUID, CAP_SETGID and
 * CAP_NET_BIND_SERVICE. Threads started afterwards inherit exactly that.
 *
 * bk_privileges_drop_to(), once the listeners exist: no supplementary groups, gid and uid the
 * front's own (--front-uid). glibc makes every thread switch, and the kernel empties each
 * thread's capabilities as it leaves uid 0. A root-owned file is then someone else's file. */
#include "boundary/privdrop.h"

#include <errno.h>
#include <grp.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

int bk_privileges_narrow(bk_error **err)
{
	static const cap_value_t keep[] = { CAP_SETUID, CAP_SETGID, CAP_NET_BIND_SERVICE };
	cap_t caps = cap_get_proc();
	cap_value_t held[BK_ARRAY_SIZE(keep)];
	cap_flag_value_t setpcap = CAP_CLEAR;
	size_t nheld = 0;
	int ret = 0;

	if (!caps)
		return bk_error_errno(err, errno, "cap_get_proc");
	cap_get_flag(caps, CAP_SETPCAP, CAP_EFFECTIVE, &setpcap);
	cap_free(caps);

	if (setpcap == CAP_SET) {
		unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
				SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
		if (cap_set_secbits(bits) < 0)
			return bk_error_errno(err, errno, "cannot lock securebits");
		for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
			if (CAP_IS_SUPPORTED(c) && cap_drop_bound(c) < 0)
				return bk_error_errno(err, errno, "cannot drop capability %d from the bounding set", c);
	}
	if (cap_reset_ambient() < 0 && errno != EINVAL)
		return bk_error_errno(err, errno, "cannot clear ambient capabilities");
	/* Of those, what we were given: a container's list need not hold CAP_NET_BIND_SERVICE
	 * (deploy/ listens above 1024), and a set cannot grow. */
	caps = cap_get_proc();
	if (!caps)
		return bk_error_errno(err, errno, "cap_get_proc");
	for (size_t i = 0; i < BK_ARRAY_SIZE(keep); i++) {
		cap_flag_value_t have = CAP_CLEAR;
		cap_get_flag(caps, keep[i], CAP_PERMITTED, &have);
		if (have == CAP_SET)
			held[nheld++] = keep[i];
	}
	cap_free(caps);
	caps = cap_init();
	if (!caps)
		return bk_error_errno(err, errno, "cap_init");
	if ((nheld && (cap_set_flag(caps, CAP_PERMITTED, (int)nheld, held, CAP_SET) < 0 ||
		       cap_set_flag(caps, CAP_EFFECTIVE, (int)nheld, held, CAP_SET) < 0)) ||
	    cap_set_proc(caps) < 0)
		ret = bk_error_errno(err, errno, "cannot narrow the capability sets");
	cap_free(caps);
	if (ret == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		ret = bk_error_errno(err, errno, "cannot set no_new_privs");
	return ret;
}

int bk_privileges_drop_to(uid_t id, bk_error **err)
{
	cap_t caps;
	cap_t none;
	int same;

	if (setgroups(0, NULL) < 0 || setresgid(id, id, id) < 0 || setresuid(id, id, id) < 0)
		return bk_error_errno(err, errno, "cannot become uid/gid %u", (unsigned)id);
	/* The kernel cleared them; make sure, rather than serve with any left. */
	caps = cap_get_proc();
	none = cap_init();
	same = caps && none ? cap_compare(caps, none) : -1;
	cap_free(caps);
	cap_free(none);
	if (same != 0)
		return bk_error_set(err, BK_INTERNAL, EPERM, "capabilities left after becoming uid %u", (unsigned)id);
	return 0;
}
