// SO_PEERCRED and SO_PEERGROUPS for Node, which exposes neither: the kernel's
// record of who connected to a unix socket (credentials at connect(2) time,
// which the peer cannot forge), used by podvol's runtime socket to refuse
// callers that are not root or in the configured group.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <node_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, err == EBADF ? "EBADF" : (err == ENOTSOCK ? "ENOTSOCK" : "EPEERCRED"), msg);
  return NULL;
}

static napi_value peer_cred(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "peerCred(fd): fd must be an integer");
    return NULL;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);

  gid_t groups[256];
  socklen_t glen = sizeof groups;
  int ngroups = 0;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
    ngroups = (int)(glen / sizeof(gid_t));
  else if (errno != ENOPROTOOPT && errno != ERANGE)
    return throw_errno(env, "getsockopt(SO_PEERGROUPS)", errno);

  napi_value obj, v, arr;
  napi_create_object(env, &obj);
  napi_create_int32(env, cred.pid, &v);
  napi_set_named_property(env, obj, "pid", v);
  napi_create_uint32(env, cred.uid, &v);
  napi_set_named_property(env, obj, "uid", v);
  napi_create_uint32(env, cred.gid, &v);
  napi_set_named_property(env, obj, "gid", v);
  napi_create_array_with_length(env, (size_t)ngroups, &arr);
  for (int i = 0; i < ngroups; i++) {
    napi_create_uint32(env, groups[i], &v);
    napi_set_element(env, arr, (uint32_t)i, v);
  }
  napi_set_named_property(env, obj, "groups", arr);
  return obj;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "peerCred", NAPI_AUTO_LENGTH, peer_cred, NULL, &fn);
  napi_set_named_property(env, exports, "peerCred", fn);
  return exports;
}
