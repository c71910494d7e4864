/* closeall.c: a program that closes every descriptor it does not know (as
 * daemons do) after its first SDP I/O, then opens new SDP connections: the
 * engine's and the shim's own descriptors must survive, and the program with
 * them. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s failed (errno %d %s)\n", __FILE__, __LINE__, #c, errno, strerror(errno)); exit(1);} } while (0)
int main(void) { alarm(20);
  int l = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in sa = {.sin_family=AF_INET}; inet_pton(AF_INET,"127.0.0.1",&sa.sin_addr);
  CHECK(bind(l,(void*)&sa,sizeof sa)==0); CHECK(listen(l,4)==0); socklen_t sl=sizeof sa; getsockname(l,(void*)&sa,&sl);
  int s = socket(AF_INET, SOCK_STREAM, 0); CHECK(connect(s,(void*)&sa,sizeof sa)==0);
  int c = accept(l, 0, 0); CHECK(c >= 0);
  CHECK(write(s, "x", 1) == 1); char b; CHECK(read(c, &b, 1) == 1);   /* engine loaded now */
  for (int fd = 3; fd < 65536; fd++) if (fd != l) close(fd);          /* close everything unknown */
  int s2 = socket(AF_INET, SOCK_STREAM, 0); CHECK(connect(s2,(void*)&sa,sizeof sa)==0);
  int c2 = accept(l, 0, 0); CHECK(c2 >= 0);
  for (int i = 0; i < 200; i++) { CHECK(write(s2, "yy", 2) == 2); char r[2]; size_t g = 0; while (g < 2) { ssize_t n = read(c2, r+g, 2-g); CHECK(n > 0); g += n; } usleep(1000); }
  printf("closeall ok\n"); return 0; }
