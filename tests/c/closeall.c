/* closeall.c: a program that closes every descriptor it does not know (as
 * daemons do) after its first SDP I/O, then opens new SDP connections: the
 * engine's and the shim's own descriptors must survive, and the program with
 * them. */
#include "selfpair.h"

int main(void)
{
	alarm(20);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair_used(l, &sa, &s, &c); /* the engine is loaded now */

	for (int fd = 3; fd < 65536; fd++)
		if (fd != l)
			close(fd);

	int s2, c2;
	pair(l, &sa, &s2, &c2);
	for (int i = 0; i < 200; i++) {
		char r[2];
		CHECK(write(s2, "yy", 2) == 2);
		read_n(c2, r, 2);
	}
	printf("closeall ok\n");
	return 0;
}
