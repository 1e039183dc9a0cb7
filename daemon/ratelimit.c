/* ratelimit.c: the token bucket of log lines about hostile input (see
 * ratelimit_i.h). */
#include "podfs/log.h"
#include "ratelimit_i.h"

bool ratelimit_allow(struct ratelimit *rl, uint64_t now_ms)
{
	uint64_t add = (now_ms - rl->stamp) * RL_PER_SEC / 1000;

	if (add) {
		rl->tokens = rl->tokens + add > RL_BURST ? RL_BURST : rl->tokens + (unsigned)add;
		rl->stamp = now_ms;
	}
	if (rl->tokens == 0) {
		rl->suppressed++;
		return false;
	}
	rl->tokens--;
	if (rl->suppressed) {
		pfs_warn("%u similar log lines suppressed", rl->suppressed);
		rl->suppressed = 0;
	}
	return true;
}
