// openat2(2) for Node, which has no *at calls: resolves a whole relative path
// below an open directory in one system call, with the kernel enforcing what
// safe-fs.ts's component-by-component walk enforces (RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_XDEV: no symlink
// followed, no mount crossed, nothing outside the directory).
//
// The call runs on libuv's thread pool (napi_async_work), never on the event
// loop: resolving a path on a hung filesystem (a stopped FUSE daemon, a dead
// NFS server) blocks a pool thread, exactly as fs.promises.open in the walk
// does, and podvol's event loop keeps serving.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// Not every libc's headers know openat2 (glibc has no wrapper at all); the
// number is 437 on every architecture (the unified syscall table since 5.1).
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

// struct open_how of <linux/openat2.h>, spelled out so older kernel headers build too.
struct podvol_open_how {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};

#define PODVOL_RESOLVE_NO_XDEV 0x01
#define PODVOL_RESOLVE_NO_MAGICLINKS 0x02
#define PODVOL_RESOLVE_NO_SYMLINKS 0x04
#define PODVOL_RESOLVE_BENEATH 0x08

static long do_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  struct podvol_open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
  return syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

// The errno's name, as node's own fs errors carry it in `code` (ELOOP, EXDEV, ...).
static const char *errno_name(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *n = strerrorname_np(err);
  if (n != NULL) return n;
#endif
  switch (err) {
    case ENOENT: return "ENOENT";
    case ELOOP: return "ELOOP";
    case EXDEV: return "EXDEV";
    case ENOTDIR: return "ENOTDIR";
    case EAGAIN: return "EAGAIN";
    case ENOSYS: return "ENOSYS";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    default: return "EUNKNOWN";
  }
}

static napi_value errno_error(napi_env env, int err, const char *path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s, openat2 '%s'", errno_name(err), strerror(err), path);
  napi_value code, message, error, num;
  napi_create_string_utf8(env, errno_name(err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, -err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_value syscall_name;
  napi_create_string_utf8(env, "openat2", NAPI_AUTO_LENGTH, &syscall_name);
  napi_set_named_property(env, error, "syscall", syscall_name);
  return error;
}

struct request {
  napi_async_work work;
  napi_deferred deferred;
  int dirfd;
  char *path;
  uint64_t flags, mode, resolve;
  long fd;
  int err;
};

static void execute(napi_env env, void *data) {
  (void)env;
  struct request *r = data;
  do {
    r->fd = do_openat2(r->dirfd, r->path, r->flags, r->mode, r->resolve);
  } while (r->fd < 0 && errno == EINTR);
  r->err = r->fd < 0 ? errno : 0;
}

static void complete(napi_env env, napi_status status, void *data) {
  struct request *r = data;
  napi_value v;
  if (status != napi_ok) {
    // Cancelled or failed before it ran: no fd was opened.
    napi_create_string_utf8(env, "openat2: the request did not run", NAPI_AUTO_LENGTH, &v);
    napi_value err;
    napi_create_error(env, NULL, v, &err);
    napi_reject_deferred(env, r->deferred, err);
  } else if (r->fd < 0) {
    napi_reject_deferred(env, r->deferred, errno_error(env, r->err, r->path));
  } else {
    napi_create_int32(env, (int32_t)r->fd, &v);
    napi_resolve_deferred(env, r->deferred, v);
  }
  napi_delete_async_work(env, r->work);
  free(r->path);
  free(r);
}

static int get_u64(napi_env env, napi_value v, uint64_t *out) {
  int64_t x;
  if (napi_get_value_int64(env, v, &x) != napi_ok || x < 0) return 0;
  *out = (uint64_t)x;
  return 1;
}

// openat2(dirfd, path, flags, mode, resolve): Promise<fd>. O_CLOEXEC is always
// added, as libuv does for every open: a mount(8) child must not inherit it.
static napi_value js_openat2(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  int32_t dirfd;
  uint64_t flags, mode, resolve;
  size_t len;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 ||
      napi_get_value_int32(env, argv[0], &dirfd) != napi_ok ||
      napi_get_value_string_utf8(env, argv[1], NULL, 0, &len) != napi_ok || !get_u64(env, argv[2], &flags) ||
      !get_u64(env, argv[3], &mode) || !get_u64(env, argv[4], &resolve)) {
    napi_throw_type_error(env, NULL, "openat2(dirfd, path, flags, mode, resolve): integers and a string");
    return NULL;
  }
  struct request *r = calloc(1, sizeof *r);
  char *path = malloc(len + 1);
  if (r == NULL || path == NULL) {
    free(r);
    free(path);
    napi_throw_error(env, "ENOMEM", "openat2: out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, argv[1], path, len + 1, &len);
  if (strlen(path) != len) {
    // An embedded NUL would silently name another path.
    free(r);
    free(path);
    napi_throw_type_error(env, "EINVAL", "openat2: path contains a NUL byte");
    return NULL;
  }
  r->dirfd = dirfd;
  r->path = path;
  r->flags = flags | O_CLOEXEC;
  r->mode = mode;
  r->resolve = resolve;
  napi_value promise, name;
  napi_create_promise(env, &r->deferred, &promise);
  napi_create_string_utf8(env, "podvol:openat2", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, r, &r->work);
  napi_queue_async_work(env, r->work);
  return promise;
}

// Whether this kernel (and any seccomp filter around us) serves openat2: an
// unknown RESOLVE_ bit is EINVAL where it exists, ENOSYS (or a filter's EPERM)
// where not. Touches no filesystem, so it may run on the event loop.
static napi_value js_supported(napi_env env, napi_callback_info info) {
  (void)info;
  long fd = do_openat2(-1, "", O_RDONLY, 0, (uint64_t)1 << 63);
  int ok = fd < 0 && errno == EINVAL;
  if (fd >= 0) close((int)fd);
  napi_value v;
  napi_get_boolean(env, ok, &v);
  return v;
}

static void set_u32(napi_env env, napi_value obj, const char *name, uint32_t value) {
  napi_value v;
  napi_create_uint32(env, value, &v);
  napi_set_named_property(env, obj, name, v);
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "openat2", NAPI_AUTO_LENGTH, js_openat2, NULL, &fn);
  napi_set_named_property(env, exports, "openat2", fn);
  napi_create_function(env, "supported", NAPI_AUTO_LENGTH, js_supported, NULL, &fn);
  napi_set_named_property(env, exports, "supported", fn);
  set_u32(env, exports, "RESOLVE_NO_XDEV", PODVOL_RESOLVE_NO_XDEV);
  set_u32(env, exports, "RESOLVE_NO_MAGICLINKS", PODVOL_RESOLVE_NO_MAGICLINKS);
  set_u32(env, exports, "RESOLVE_NO_SYMLINKS", PODVOL_RESOLVE_NO_SYMLINKS);
  set_u32(env, exports, "RESOLVE_BENEATH", PODVOL_RESOLVE_BENEATH);
  return exports;
}
