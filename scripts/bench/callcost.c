/* callcost: what one call from C into the engine costs, the engine's work left out: the
 * application's threads call sdp_query on a descriptor that is no connection (the engine looks
 * it up and says EBADF) ITERS times each, THREADS at once.
 *
 *   callcost ENGINE THREADS ITERS
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int64_t (*query_fn)(int, int);
static query_fn query;
static long iters;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	(void)arg;
	int64_t sum = 0;
	for (long i = 0; i < iters; i++)
		sum += query(999999, 0);
	return (void *)(intptr_t)sum;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: callcost ENGINE THREADS ITERS\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "callcost: %s\n", dlerror());
		return 1;
	}
	query = (query_fn)dlsym(h, "sdp_query");
	int threads = atoi(argv[2]);
	iters = atol(argv[3]);
	if (!query || threads < 1 || threads > 64 || iters < 1) {
		fprintf(stderr, "callcost: no sdp_query, or bad THREADS or ITERS\n");
		return 2;
	}
	query(999999, 0); /* the runtime's start, outside the timing */
	pthread_t t[64];
	double t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("%.1f\n", (now() - t0) / (double)iters * 1e9);
	return 0;
}
