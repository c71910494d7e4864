/* follow.c: an epoll registration made through one descriptor of an SDP
 * socket lives on when that descriptor is closed and a duplicate keeps the
 * socket open, as the kernel keeps it for the open file. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
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
  CHECK(write(s, "a", 1) == 1); char b; CHECK(read(c, &b, 1) == 1);
  int ep = epoll_create1(0); struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 777};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
  int d = dup(s); CHECK(d >= 0); CHECK(close(s) == 0);
  CHECK(write(c, "zz", 2) == 2);
  struct epoll_event out[2]; int n = epoll_wait(ep, out, 2, 3000);
  CHECK(n == 1 && out[0].data.u64 == 777);
  char r[2]; CHECK(read(d, r, 2) == 2);
  CHECK(epoll_wait(ep, out, 2, 50) == 0);
  printf("follow ok\n"); return 0; }
