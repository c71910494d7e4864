/* preload_cost: what libsdp costs a program that does no SDP.
 *
 *   preload_cost exec  SHIM N   median wall time of fork+exec of /bin/true,
 *                               plain and with LD_PRELOAD=SHIM, interleaved
 *   preload_cost pipe  N        (run under LD_PRELOAD) ns per write+read of
 *                               one byte on a pipe through the shim's hooks
 *                               and through libc's own functions, interleaved
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double run_true(char **env)
{
	double t = now_ns();
	pid_t p = fork();
	if (p == 0) {
		char *argv[] = { "/bin/true", NULL };
		execve("/bin/true", argv, env);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "/bin/true failed\n");
		exit(1);
	}
	return now_ns() - t;
}

static int exec_cost(const char *shim, int n)
{
	static char pre[4096];
	snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shim);
	char *plain[] = { "PATH=/usr/bin:/bin", NULL };
	char *with[] = { "PATH=/usr/bin:/bin", pre, NULL };
	double *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n);
	for (int i = 0; i < n; i++) {
		a[i] = run_true(plain);
		b[i] = run_true(with);
	}
	double ma = median(a, n), mb = median(b, n);
	printf("exec_true_plain_us=%.1f exec_true_preload_us=%.1f exec_true_delta_us=%.1f runs=%d\n",
	       ma / 1e3, mb / 1e3, (mb - ma) / 1e3, n);
	return 0;
}

static int pipe_cost(int n)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	ssize_t (*lwrite)(int, const void *, size_t) = libc ? dlsym(libc, "write") : NULL;
	ssize_t (*lread)(int, void *, size_t) = libc ? dlsym(libc, "read") : NULL;
	if (!lwrite || !lread) {
		fprintf(stderr, "libc's read/write not found\n");
		return 1;
	}
	int p[2];
	if (pipe(p))
		return 1;
	char c = 'x';
	enum { ROUNDS = 21 };
	double shim[ROUNDS], plain[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		double t = now_ns();
		for (int i = 0; i < n; i++) {
			if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1)
				return 1;
		}
		shim[r] = (now_ns() - t) / n;
		t = now_ns();
		for (int i = 0; i < n; i++) {
			if (lwrite(p[1], &c, 1) != 1 || lread(p[0], &c, 1) != 1)
				return 1;
		}
		plain[r] = (now_ns() - t) / n;
	}
	double ms = median(shim, ROUNDS), mp = median(plain, ROUNDS);
	printf("pipe_rw_libc_ns=%.1f pipe_rw_shim_ns=%.1f pipe_rw_delta_ns=%.1f iterations=%d\n", mp, ms, ms - mp, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "exec"))
		return exec_cost(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "pipe"))
		return pipe_cost(atoi(argv[2]));
	fprintf(stderr, "usage: preload_cost exec SHIM N | preload_cost pipe N\n");
	return 2;
}
