// A socket's two queues, for Node, which exposes neither.
//
// - unread(fd): the bytes waiting unread in a connection's receive queue
//   (ioctl FIONREAD, the kernel's SIOCINQ). The connection budget asks it
//   when it must close a connection at its cap: a connection whose request is
//   already in the kernel's queue is about to be served, one that never sent
//   a byte is not, though Node has read nothing from either yet.
// - deferAccept(fd, seconds): TCP_DEFER_ACCEPT on a listening socket. The
//   kernel then hands over a connection only once its first data arrives (or
//   the seconds are up), so a flood of connections that send nothing waits in
//   the kernel and costs no descriptor, and a probe is accepted with its
//   request (or TLS ClientHello) already there.
#define NAPI_VERSION 8
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <node_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, err == EBADF ? "EBADF" : (err == ENOTSOCK ? "ENOTSOCK" : "ESOCKQ"), msg);
  return NULL;
}

/** The int32 arguments of a call; false (a TypeError thrown) if there are fewer or they are not integers. */
static int int_args(napi_env env, napi_callback_info info, size_t want, int32_t *out, const char *usage) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want) goto bad;
  for (size_t i = 0; i < want; i++)
    if (napi_get_value_int32(env, argv[i], &out[i]) != napi_ok) goto bad;
  return 1;
bad:
  napi_throw_type_error(env, NULL, usage);
  return 0;
}

static napi_value unread(napi_env env, napi_callback_info info) {
  int32_t a[1];
  if (!int_args(env, info, 1, a, "unread(fd): fd must be an integer")) return NULL;
  int n = 0;
  if (ioctl(a[0], FIONREAD, &n) != 0) return throw_errno(env, "ioctl(FIONREAD)", errno);
  napi_value v;
  napi_create_int32(env, n, &v);
  return v;
}

static napi_value defer_accept(napi_env env, napi_callback_info info) {
  int32_t a[2];
  if (!int_args(env, info, 2, a, "deferAccept(fd, seconds): both must be integers")) return NULL;
  int seconds = a[1];
  if (setsockopt(a[0], IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds) != 0)
    return throw_errno(env, "setsockopt(TCP_DEFER_ACCEPT)", errno);
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "unread", NAPI_AUTO_LENGTH, unread, NULL, &fn);
  napi_set_named_property(env, exports, "unread", fn);
  napi_create_function(env, "deferAccept", NAPI_AUTO_LENGTH, defer_accept, NULL, &fn);
  napi_set_named_property(env, exports, "deferAccept", fn);
  return exports;
}
