/* shim/libc.c: the real libc functions, resolved once. */
#include "shim.h"

/* ---- the real libc functions ------------------------------------------ */

struct shim_real real;

pthread_once_t real_once = PTHREAD_ONCE_INIT;

#define RESOLVE(name) real.name = dlsym(RTLD_NEXT, #name)
void resolve_real(void)
{
	RESOLVE(socket); RESOLVE(bind); RESOLVE(listen); RESOLVE(accept);
	RESOLVE(accept4); RESOLVE(connect); RESOLVE(read); RESOLVE(write);
	RESOLVE(readv); RESOLVE(writev); RESOLVE(recv); RESOLVE(recvfrom);
	RESOLVE(recvmsg); RESOLVE(send); RESOLVE(sendto); RESOLVE(sendmsg);
	RESOLVE(close); RESOLVE(shutdown); RESOLVE(getsockname);
	RESOLVE(getpeername); RESOLVE(getsockopt); RESOLVE(setsockopt); RESOLVE(dup2); RESOLVE(dup3);
	RESOLVE(poll); RESOLVE(ppoll); RESOLVE(select); RESOLVE(pselect);
	RESOLVE(epoll_create); RESOLVE(epoll_create1); RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait); RESOLVE(epoll_pwait);
	RESOLVE(dup); RESOLVE(fcntl); RESOLVE(ioctl); RESOLVE(sendfile);
}
