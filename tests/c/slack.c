/* slack.c: loading the engine leaves the application's thread its own timer
 * slack, and the Go runtime's first threads run with the engine's 1 ms
 * (ENGINE_TIMER_SLACK_NS in shim/engine.c), so that the runtime's monitor
 * does not wake every 20 us. Plain, the program has one thread. */
#define _GNU_SOURCE
#include "selfpair.h"
#include <dirent.h>
#include <sys/prctl.h>

#define OWN_SLACK 123456UL
#define ENGINE_SLACK 1000000UL

/* slack_of reads a thread's timer slack (/proc/<tid>, which is also open
 * for a thread that leads no process). */
static unsigned long slack_of(const char *tid)
{
	char path[64], buf[32];
	snprintf(path, sizeof path, "/proc/%s/timerslack_ns", tid);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	CHECK(fgets(buf, sizeof buf, f) != NULL);
	fclose(f);
	return strtoul(buf, NULL, 10);
}

int main(void)
{
	alarm(20);
	CHECK(prctl(PR_SET_TIMERSLACK, OWN_SLACK, 0, 0, 0) == 0);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair_used(l, &sa, &s, &c);

	CHECK((unsigned long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) == OWN_SLACK);
	char self[16];
	snprintf(self, sizeof self, "%d", gettid());
	CHECK(slack_of(self) == OWN_SLACK);
	DIR *d = opendir("/proc/self/task");
	CHECK(d != NULL);
	int threads = 0, relaxed = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (e->d_name[0] == '.')
			continue;
		threads++;
		if (strcmp(e->d_name, self) != 0 && slack_of(e->d_name) == ENGINE_SLACK)
			relaxed++;
	}
	closedir(d);
	const char *pre = getenv("LD_PRELOAD");
	if (pre && *pre) {
		/* The runtime's first thread and its monitor at least. */
		if (relaxed < 2) {
			fprintf(stderr, "%d of %d threads run with the engine's slack\n", relaxed, threads);
			return 1;
		}
	} else {
		CHECK(threads == 1);
	}
	printf("slack ok: %d threads, %d with the engine's slack\n", threads, relaxed);
	return 0;
}
