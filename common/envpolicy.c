#include "envpolicy.h"

bool bk_env_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > 256 || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}
