// Has the mount table changed? For Node, which cannot poll(2) a /proc file
// for POLLPRI. The kernel counts every change of a mount namespace (mount,
// unmount, remount, move, propagation of either) in the namespace's event
// counter; an open /proc/<pid>/mountinfo remembers the count it last
// reported, and poll(2) on it returns POLLPRI|POLLERR when the count moved
// since then, and remembers the new count (fs/proc_namespace.c mounts_poll).
//
// watch(path) opens the file and keeps it open; changed(handle) polls it
// without waiting (timeout 0). That is one system call that touches no
// filesystem and takes no lock a hung mount could hold, so it runs on the
// event loop, synchronously: the answer is the kernel's state at the moment
// of the call, with no thread hand-off in between that a mount made just
// before could race.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

// linux/magic.h PROC_SUPER_MAGIC: only a procfs mountinfo signals changes; a
// regular file polls as always readable and would claim "never changed".
#define PODVOL_PROC_SUPER_MAGIC 0x9fa0

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  int *fd = data;
  close(*fd);
  free(fd);
}

static napi_value throw_errno(napi_env env, int err, const char *what, const char *path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s '%s'", what, strerror(err), path);
  napi_throw_error(env, NULL, msg);
  return NULL;
}

// watch(path): an opaque handle holding the open file; the file is closed when
// the handle is garbage-collected. Throws when the file cannot be opened or is
// not on procfs.
static napi_value js_watch(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  size_t len;
  char path[4096];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len) != napi_ok ||
      len >= sizeof path - 1 || strlen(path) != len) {
    napi_throw_type_error(env, NULL, "watch(path): a path without NUL bytes, shorter than 4095 bytes");
    return NULL;
  }
  // O_CLOEXEC: a mount(8) child must not inherit it.
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return throw_errno(env, errno, "open", path);
  struct statfs sfs;
  if (fstatfs(fd, &sfs) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "fstatfs", path);
  }
  if (sfs.f_type != PODVOL_PROC_SUPER_MAGIC) {
    close(fd);
    napi_throw_error(env, NULL, "watch: not a /proc file, it cannot signal mount table changes");
    return NULL;
  }
  int *box = malloc(sizeof *box);
  if (box == NULL) {
    close(fd);
    napi_throw_error(env, "ENOMEM", "watch: out of memory");
    return NULL;
  }
  *box = fd;
  napi_value handle;
  if (napi_create_external(env, box, finalize, NULL, &handle) != napi_ok) {
    close(fd);
    free(box);
    napi_throw_error(env, NULL, "watch: could not create the handle");
    return NULL;
  }
  return handle;
}

// changed(handle): true when the namespace's mount table changed since the
// previous changed() on this handle (or since watch() for the first call).
// A failed poll answers true: "maybe changed" only costs a read.
static napi_value js_changed(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int *fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_external(env, argv[0], (void **)&fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "changed(handle): a handle from watch()");
    return NULL;
  }
  struct pollfd p = {.fd = *fd, .events = POLLPRI};
  int n;
  do {
    n = poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  int changed = n != 0 && (n < 0 || (p.revents & (POLLPRI | POLLERR | POLLNVAL)) != 0);
  napi_value v;
  napi_get_boolean(env, changed, &v);
  return v;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "watch", NAPI_AUTO_LENGTH, js_watch, NULL, &fn);
  napi_set_named_property(env, exports, "watch", fn);
  napi_create_function(env, "changed", NAPI_AUTO_LENGTH, js_changed, NULL, &fn);
  napi_set_named_property(env, exports, "changed", fn);
  return exports;
}
