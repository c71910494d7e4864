/* The shim's own system calls made through syscall(2) go straight to libc's
 * syscall(), never through the one the shim exports for applications
 * (shim/uring.c), which routes some of them (close) back into the hooks.
 * Each call passes all six arguments (unused ones 0), so nothing reads
 * arguments that were not passed. Where the shim is not linked in (a test
 * program built with shim/trust.c alone), shim_syscall7 is absent and libc's
 * syscall() is called as written. Include after <unistd.h>. */
#ifndef LIBSDP_SHIM_RAW_H
#define LIBSDP_SHIM_RAW_H

long shim_syscall7(long n, long a, long b, long c, long d, long e, long f) __attribute__((weak));

#define SHIM_SYSCALL7(n, a, b, c, d, e, f, ...)                                                     \
	shim_syscall7((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define syscall(...) (shim_syscall7 ? SHIM_SYSCALL7(__VA_ARGS__, 0, 0, 0, 0, 0, 0) : syscall(__VA_ARGS__))

#endif
