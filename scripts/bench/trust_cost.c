/* trust_cost: what shim/trust.c's checks cost a connection: N checks of
 * ADDR:PORT (its SDP port SPORT) before connect() in a row, then N checks of
 * the listener that took a connection to SPORT; microseconds per check.
 *
 *   trust_cost ADDR PORT SPORT [N=10000]
 */
#include "shim/trust.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: trust_cost ADDR PORT SPORT [N]\n");
		return 2;
	}
	int port = atoi(argv[2]), sport = atoi(argv[3]), n = argc > 4 ? atoi(argv[4]) : 10000;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || n <= 0) {
		fprintf(stderr, "trust_cost: bad address or count\n");
		return 2;
	}
	char detail[160] = "";
	unsigned uid = 0;
	int r = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		r = trust_check((struct sockaddr *)&a, port, sport, detail, sizeof detail, &uid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
	printf("trust_check %s:%d answer=%d us_per_check=%.2f %s\n", argv[1], port, r, us, detail);

	/* The check after connect(): of the listener that took a connection to SPORT. */
	struct sockaddr_in s = a;
	s.sin_port = htons(sport);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&s, sizeof s) < 0) {
		perror("trust_cost: connect to the SDP port");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		r = trust_peer((struct sockaddr *)&a, sport, uid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
	printf("trust_peer %s:%d answer=%d us_per_check=%.2f\n", argv[1], sport, r, us);
	close(fd);
	return 0;
}
