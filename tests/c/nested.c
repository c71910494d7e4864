/* nested.c: an epoll set holding an SDP socket, watched with poll() and from
 * inside another epoll set: its members' readiness lives in user space (bytes
 * left unread after a partial read), and both watchers must see it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s failed (errno %d %s)\n", __FILE__, __LINE__, #c, errno, strerror(errno)); exit(1);} } while (0)
int main(void) { alarm(20);
  int l = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in sa = {.sin_family=AF_INET}; inet_pton(AF_INET,"127.0.0.1",&sa.sin_addr);
  CHECK(bind(l,(void*)&sa,sizeof sa)==0); CHECK(listen(l,4)==0); socklen_t sl=sizeof sa; getsockname(l,(void*)&sa,&sl);
  int s = socket(AF_INET, SOCK_STREAM, 0); CHECK(connect(s,(void*)&sa,sizeof sa)==0);
  int c = accept(l, 0, 0); CHECK(c >= 0);
  int inner = epoll_create1(0), outer = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = s}; CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, s, &ev) == 0);
  struct epoll_event ev2 = {.events = EPOLLIN, .data.fd = inner}; CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev2) == 0);
  struct pollfd p = {.fd = inner, .events = POLLIN};
  CHECK(poll(&p, 1, 50) == 0);
  CHECK(write(c, "0123456789", 10) == 10);
  CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
  char b[4]; CHECK(read(s, b, 4) == 4);            /* 6 bytes stay in user space */
  CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN));
  struct epoll_event out[2]; CHECK(epoll_wait(outer, out, 2, 1000) == 1 && out[0].data.fd == inner);
  CHECK(epoll_wait(inner, out, 2, 1000) == 1 && out[0].data.fd == s);
  char r[6]; CHECK(read(s, r, 6) == 6);
  CHECK(epoll_wait(inner, out, 2, 0) == 0);
  printf("nest ok\n"); return 0; }
