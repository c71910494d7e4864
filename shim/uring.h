/* What shim/uring.c asks of shim.c about a descriptor. */
#ifndef LIBSDP_SHIM_URING_H
#define LIBSDP_SHIM_URING_H

enum { SHIM_FD_OTHER = 1, SHIM_FD_SDP = 2, SHIM_FD_LISTEN = 3 };

int shim_knows(int fd);
void shim_listener_tcp_only(int fd);
void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void uring_forget(int fd);

#endif
