/* The main thread's stack bounds for the engine's runtime.
 *
 * The first call a thread makes into the engine asks pthread_getattr_np for
 * the thread's stack (Go's runtime/cgo, x_cgo_getstackbound: its cgo
 * callbacks run on that stack). For the process's main thread glibc finds
 * the stack by reading /proc/self/maps line by line, 1 KiB a read: 24 reads
 * and 0.17-0.34 ms in curl, once per fresh process, inside its first
 * connection's set-up (docs/PERFORMANCE.md, "A fresh process's first call").
 * For that one caller the shim answers from what the process already
 * knows: the stack ends in the page above __libc_stack_end (the initial
 * stack pointer; glibc's top too) and reaches down RLIMIT_STACK at most. The runtime needs bounds that hold
 * the calling stack pointer, which these do; the application's own calls,
 * and the engine's for other threads (glibc answers those from the thread's
 * descriptor, without /proc), get glibc's answer. */
#include "shim.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/syscall.h>

extern void *__libc_stack_end;

/* engine_base is the engine's load address (its Dl_info.dli_fbase), set
 * when the engine is bound: only calls from its code take the short way. */
static void *_Atomic engine_base;

/* stack_cap bounds the size given when RLIMIT_STACK is unlimited or very
 * large: the runtime only uses the low bound to catch an overflow of the
 * C stack it runs callbacks on. */
#define STACK_CAP (8UL << 20)

void stackbound_engine(void *fn)
{
	Dl_info di;
	if (fn && dladdr(fn, &di) && di.dli_fbase)
		atomic_store(&engine_base, di.dli_fbase);
}

typedef int (*getattr_fn)(pthread_t, pthread_attr_t *);

/* main_thread_bounds sets attr to the main thread's stack as described
 * above; 0, or -1 when it cannot tell (then glibc answers). */
static int main_thread_bounds(pthread_attr_t *attr)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t hi = ((uintptr_t)__libc_stack_end & ~(page - 1)) + page; /* glibc's top */
	struct rlimit rl;
	if (!__libc_stack_end || getrlimit(RLIMIT_STACK, &rl) != 0)
		return -1;
	uintptr_t size = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > STACK_CAP ? STACK_CAP : rl.rlim_cur;
	size &= ~(page - 1);
	if (size < (uintptr_t)PTHREAD_STACK_MIN || size >= hi)
		return -1;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	if (sp <= hi - size || sp > hi)
		return -1; /* not on the stack we think it is */
	if (pthread_attr_init(attr) != 0)
		return -1;
	if (pthread_attr_setstack(attr, (void *)(hi - size), size) != 0) {
		pthread_attr_destroy(attr);
		return -1;
	}
	return 0;
}

EXPORT int pthread_getattr_np(pthread_t th, pthread_attr_t *attr)
{
	static getattr_fn real_getattr;
	void *base = atomic_load(&engine_base);
	if (base && pthread_equal(th, pthread_self()) && (pid_t)syscall(SYS_gettid) == getpid()) {
		Dl_info di;
		if (dladdr(__builtin_return_address(0), &di) && di.dli_fbase == base && main_thread_bounds(attr) == 0)
			return 0;
	}
	if (!real_getattr)
		real_getattr = (getattr_fn)dlsym(RTLD_NEXT, "pthread_getattr_np");
	if (!real_getattr)
		return ENOSYS;
	return real_getattr(th, attr);
}
