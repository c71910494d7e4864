/* bellcost.c: what waking a process asleep in poll() costs, two ways, between a parent and a
 * child that wake each other N times: a one-octet send on a loopback TCP connection (the
 * doorbell of libsdp's shared-memory transport, which makes the application's own socket
 * readable) and a write to an eventfd. Prints the round trip and the CPU each side spends per
 * round trip (ringing, waking, reading the bell).
 *
 *   bellcost tcp|eventfd N */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                      \
	do {                                                          \
		if (!(c)) {                                           \
			perror(#c);                                   \
			exit(1);                                      \
		}                                                     \
	} while (0)

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int tcp;

static void ring(int fd)
{
	uint64_t one = 1;
	CHECK(tcp ? send(fd, "x", 1, 0) == 1 : write(fd, &one, 8) == 8);
}

static void await(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	CHECK(poll(&p, 1, 10000) == 1);
	char buf[8];
	CHECK(read(fd, buf, tcp ? 1 : 8) == (tcp ? 1 : 8));
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "eventfd"))) {
		fprintf(stderr, "usage: bellcost tcp|eventfd N\n");
		return 2;
	}
	tcp = !strcmp(argv[1], "tcp");
	int n = atoi(argv[2]);
	int to_child, at_child, to_parent, at_parent; /* where each side rings and waits */
	if (tcp) {
		int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in sa = { .sin_family = AF_INET };
		CHECK(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr) == 1);
		CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0);
		socklen_t sl = sizeof sa;
		CHECK(getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0);
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0);
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		to_child = c, at_child = s, to_parent = s, at_parent = c;
	} else {
		to_child = at_child = eventfd(0, 0);
		to_parent = at_parent = eventfd(0, 0);
		CHECK(to_child >= 0 && to_parent >= 0);
	}
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		double c0 = cpu_s();
		for (int i = 0; i < n; i++) {
			await(at_child);
			ring(to_parent);
		}
		printf("%-8s child:  %.2f µs of CPU a round trip\n", argv[1], (cpu_s() - c0) / n * 1e6);
		fflush(stdout);
		_exit(0);
	}
	double t0 = now_s(), c0 = cpu_s();
	for (int i = 0; i < n; i++) {
		ring(to_child);
		await(at_parent);
	}
	double t = now_s() - t0, c = cpu_s() - c0;
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("%-8s parent: %.2f µs of CPU a round trip, round trip %.2f µs\n", argv[1], c / n * 1e6, t / n * 1e6);
	return 0;
}
