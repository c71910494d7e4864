/* stackbound.c: the engine, loaded and first called from the main thread,
 * does not make glibc read /proc/self/maps for that thread's stack
 * (shim/stackbound.c answers the engine's runtime); the application's own
 * pthread_getattr_np still gets glibc's answer (the top it gives: the page
 * above the initial stack pointer).
 * The test runs it under strace: no open of /proc/self/maps before the
 * line "stackbound: the application asks", one after it. */
#define _GNU_SOURCE
#include "selfpair.h"
#include <pthread.h>
#include <stdint.h>

extern void *__libc_stack_end;

/* maps_opened counts the lines of /proc/self/maps: the program's own read,
 * which the trace also shows after the mark. */
static int maps_lines(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f != NULL);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

int main(void)
{
	alarm(20);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair_used(l, &sa, &s, &c);

	static const char mark[] = "stackbound: the application asks\n";
	CHECK(write(2, mark, sizeof mark - 1) == (ssize_t)(sizeof mark - 1));
	pthread_attr_t a;
	CHECK(pthread_attr_init(&a) == 0);
	CHECK(pthread_getattr_np(pthread_self(), &a) == 0);
	void *addr;
	size_t size;
	CHECK(pthread_attr_getstack(&a, &addr, &size) == 0);
	pthread_attr_destroy(&a);
	/* glibc's top: the page above the initial stack pointer */
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t top = ((uintptr_t)__libc_stack_end & -page) + page;
	if ((uintptr_t)addr + size != top || size < 64 * 1024) {
		fprintf(stderr, "pthread_getattr_np: stack %p + %zu, wanted one ending at %#lx\n", addr, size, top);
		return 1;
	}
	printf("stackbound ok: %zu KiB of stack below %#lx, %d mappings\n", size >> 10, top, maps_lines());
	return 0;
}
