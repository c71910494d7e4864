/* trustpeer: connects to 127.0.0.1:PORT and prints what shim/trust.c's
 * trust_peer says, for each UID given, of the listener that took the
 * connection: "UID yes" or "UID no" (TestTrustPeer).
 *
 *   trustpeer PORT UID...
 */
#include "shim/trust.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: trustpeer PORT UID...\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("trustpeer: connect");
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		int r = trust_peer((struct sockaddr *)&a, atoi(argv[1]), (unsigned)strtoul(argv[i], NULL, 10));
		printf("%s %s\n", argv[i], r == 1 ? "yes" : r == 0 ? "no" : "unknown");
	}
	close(fd);
	return 0;
}
