/* epollwaiters.c: two threads in epoll_wait on one set. A second thread
 * sleeps in the set's wait while the first one's wait returns; the first
 * must leave the connections' sleep announcements alone (over shared memory
 * their peers would ring nothing), or the second, woken by nothing, would
 * miss the bytes that come for it. The first thread's wait returns for a
 * one-shot registration re-armed with a byte already there: under libsdp the
 * byte is in the engine and the kernel wakes nobody, so the first thread
 * takes it; over TCP the re-arm may wake the second thread for it instead.
 * Either way each byte is reported exactly once, to one of the two. */
#include "selfpair.h"
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>

#define ROUNDS 50

static int ep, rb;
static _Atomic pid_t waiter_tid;

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static _Atomic int waiter_got; /* the descriptor the second thread's wait reported */

/* waiter: one wait, which must report one connection within 5 s. */
static void *waiter(void *arg)
{
	(void)arg;
	waiter_tid = (pid_t)syscall(SYS_gettid);
	struct epoll_event out[2];
	int n = epoll_wait(ep, out, 2, 5000);
	CHECK(n == 1);
	waiter_got = out[0].data.fd;
	return NULL;
}

/* asleep_in_wait says whether thread tid sleeps in the kernel's epoll_wait
 * or epoll_pwait (its state and its system call, from /proc). */
static int asleep_in_wait(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t k = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[k] = 0;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return 0;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	if (!(f = fopen(path, "r")))
		return 0;
	long nr = -1;
	int ok = fscanf(f, "%ld", &nr) == 1;
	fclose(f);
	return ok && (nr == SYS_epoll_wait || nr == SYS_epoll_pwait);
}

int main(void)
{
	alarm(120);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int a, ra, b;
	pair_used(l, &sa, &a, &ra);
	pair_used(l, &sa, &b, &rb);
	ep = epoll_create1(0);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.fd = ra };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ra, &ev) == 0);
	struct epoll_event evb = { .events = EPOLLIN, .data.fd = rb };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rb, &evb) == 0);
	struct epoll_event out[2];
	char c;
	for (int r = 0; r < ROUNDS; r++) {
		/* Both connections busy: a byte each, reported and read. */
		CHECK(write(b, "x", 1) == 1);
		CHECK(epoll_wait(ep, out, 2, 5000) == 1 && out[0].data.fd == rb);
		read_n(rb, &c, 1);
		CHECK(write(a, "yz", 2) == 2);
		CHECK(epoll_wait(ep, out, 2, 5000) == 1 && out[0].data.fd == ra); /* ra now disabled */
		read_n(ra, &c, 1); /* one byte stays with the engine */

		/* The second thread sleeps in the set's wait, rb said to sleep. */
		waiter_tid = 0;
		pthread_t th;
		CHECK(pthread_create(&th, NULL, waiter, NULL) == 0);
		int64_t end = now_ms() + 5000;
		while (!(waiter_tid && asleep_in_wait(waiter_tid)) && now_ms() < end)
			sched_yield();
		CHECK(waiter_tid && asleep_in_wait(waiter_tid));

		/* This thread's wait returns ra, re-armed with its byte (unless
		 * the re-arm woke the other thread for it, as TCP may). */
		waiter_got = -1;
		CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, ra, &ev) == 0);
		int n = epoll_wait(ep, out, 2, 0);
		CHECK(n == 0 || (n == 1 && out[0].data.fd == ra));

		/* rb's byte must wake the sleeping thread, if it still sleeps. */
		CHECK(write(b, "w", 1) == 1);
		CHECK(pthread_join(th, NULL) == 0);
		if (n == 1) {
			CHECK(waiter_got == rb);
		} else {
			CHECK(waiter_got == ra);
			CHECK(epoll_wait(ep, out, 2, 5000) == 1 && out[0].data.fd == rb);
		}
		read_n(ra, &c, 1);
		CHECK(c == 'z');
		read_n(rb, &c, 1);
		CHECK(c == 'w');
		CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, ra, &ev) == 0);
	}
	printf("waiters ok\n");
	return 0;
}
