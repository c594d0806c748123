// posix_spawn(3) for the mount layer's runner (src/mount/spawn-runner.ts).
// Node starts a child with fork(2) (libuv, no CLONE_VM on Linux), which copies
// the page tables of the whole daemon: 7.6-8.8 ms per mount or umount at
// podvol's size (docs/performance.md, Process spawns). glibc's posix_spawn
// clones with CLONE_VM | CLONE_VFORK: nothing is copied, the calling thread is
// suspended until the child has called execve. That thread is this addon's
// waiting thread, not the event loop: on a busy 2-core machine the new child
// can wait a scheduler slice or more before it runs (1.3 ms a start on average
// in P1 and P2, measured in the event loop before), time the loop now spends
// on other work.
//
// start(file, args, env, done) starts `file` (looked up on PATH) with argv
// `args` and environment `env` (strings "K=V"), no shell; stdin is /dev/null,
// stdout and stderr one pipe (interleaved, as they were written); every other
// descriptor is closed in the child, every signal has its default action and
// none is blocked (Node ignores SIGPIPE, and an ignored signal stays ignored
// across execve). It returns a handle at once (it throws only for bad
// arguments or no memory, pipe or thread); a start that fails (ENOENT for a
// missing binary: glibc reports execve's failure as posix_spawn's result)
// calls done(null, null, <empty>, code) with the errno's name.
//
// The child is waited for by a thread of this addon's own, one per child,
// polling the child's pidfd and the pipe: it never holds one of libuv's pool
// threads (a umount under a dead NFS server can wait forever, and the pool
// also serves the daemon's fs calls), and it reports when the child exits even
// if a grandchild keeps the pipe open (a FUSE helper that daemonizes). libuv's
// SIGCHLD handler reaps only the pids of its own process handles, so the two do
// not meet. done(exitCode, signal, output) is called on the JS thread: exitCode
// a number or null, signal a number or null, output a Buffer (at most
// MAX_OUTPUT bytes; the rest is read and dropped).
//
// kill(handle, sig) signals the child through its pidfd, so a reaped child's
// recycled pid can never be hit; false once the child was reaped (a kill before
// the child has started is sent as soon as it has, and says true). unref(handle)
// stops the child's wait from keeping the process alive (a child stuck in the
// kernel that the runner has given up on).
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/** mount(8) and umount(8) print a line or two; this bounds a runaway child. */
#define MAX_OUTPUT (1 << 20)

typedef struct {
  atomic_int refs; /* the JS handle, and the tsfn (the waiting thread's, released by its finalizer) */
  /* What the thread starts: freed by it once posix_spawn has returned. */
  char *file;
  char **args;
  char **envp;
  int in;          /* the pipe's write end, the child's stdout and stderr; closed by the thread after the start */
  atomic_int pidfd; /* -1 until the thread has started the child; closed on the JS thread after the result */
  atomic_int pending_signal; /* a kill() before the child was started: sent by the thread once it is */
  int out;         /* the pipe's read end; the thread's */
  atomic_bool reaped;
  int spawn_error; /* the errno of a failed start, 0 otherwise */
  napi_threadsafe_function tsfn;
  /* Written by the thread before it calls the tsfn, read by the JS thread after. */
  int exit_code; /* -1: none */
  int signal;    /* 0: none */
  char *buf;
  size_t len;
  size_t cap;
} child_t;

static void free_strings(char **v);

static void child_unref(child_t *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1) {
    free(c->file);
    free_strings(c->args);
    free_strings(c->envp);
    free(c->buf);
    free(c);
  }
}

static napi_value throw_errno(napi_env env, int err, const char *what) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_value code, message, error;
  napi_create_string_utf8(env, strerrorname_np(err) ? strerrorname_np(err) : "EUNKNOWN", NAPI_AUTO_LENGTH,
                          &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

static void append(child_t *c, const char *data, size_t n) {
  if (c->len >= MAX_OUTPUT) return;
  if (n > MAX_OUTPUT - c->len) n = MAX_OUTPUT - c->len;
  if (c->len + n > c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 1024;
    while (cap < c->len + n) cap *= 2;
    char *b = realloc(c->buf, cap);
    if (!b) return;
    c->buf = b;
    c->cap = cap;
  }
  memcpy(c->buf + c->len, data, n);
  c->len += n;
}

/** Reads what the pipe holds now; false at end of file or error. */
static bool drain(child_t *c) {
  char chunk[4096];
  for (;;) {
    ssize_t n = read(c->out, chunk, sizeof chunk);
    if (n > 0) {
      append(c, chunk, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

/** Starts c's child; its errno, or 0 with c->pidfd set. Frees what the start needed. */
static int start_child(child_t *c) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  bool fa_ok = posix_spawn_file_actions_init(&fa) == 0;
  bool attr_ok = posix_spawnattr_init(&attr) == 0;
  sigset_t all, none;
  /* Every signal, the two glibc keeps for itself included (32 and 33: sigfillset leaves them out, and the
     daemon's Node ignores them, which execve would pass on); test/mount/exec.test.ts checks the child's SigIgn. */
  memset(&all, 0xff, sizeof all);
  sigemptyset(&none);
  int err = !fa_ok || !attr_ok ? ENOMEM : 0;
  if (!err) err = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (!err) err = posix_spawn_file_actions_adddup2(&fa, c->in, 1);
  if (!err) err = posix_spawn_file_actions_adddup2(&fa, c->in, 2);
  if (!err) err = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  if (!err) err = posix_spawnattr_setsigdefault(&attr, &all);
  if (!err) err = posix_spawnattr_setsigmask(&attr, &none);
  if (!err) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  /* This thread blocks every signal (created so by js_start); the child's mask is set above. */
  pid_t pid = -1;
  if (!err) err = posix_spawnp(&pid, c->file, &fa, &attr, c->args, c->envp);
  close(c->in);
  c->in = -1;
  if (fa_ok) posix_spawn_file_actions_destroy(&fa);
  if (attr_ok) posix_spawnattr_destroy(&attr);
  free(c->file);
  free_strings(c->args);
  free_strings(c->envp);
  c->file = NULL;
  c->args = c->envp = NULL;
  if (err) return err;
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) {
    /* Cannot happen on the kernels available() accepts; do not leave the child unwaited. */
    int e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return e;
  }
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  atomic_store(&c->pidfd, pidfd);
  /* A kill() that found no pidfd yet left its signal here (both sides are sequentially consistent,
     so a kill is never lost; one that raced may arrive twice, which a runner's TERM or KILL allows). */
  int sig = atomic_exchange(&c->pending_signal, 0);
  if (sig) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
  return 0;
}

static void *wait_child(void *arg) {
  child_t *c = arg;
  c->spawn_error = start_child(c);
  if (c->spawn_error) {
    close(c->out);
    atomic_store(&c->reaped, true);
    napi_call_threadsafe_function(c->tsfn, NULL, napi_tsfn_blocking);
    napi_release_threadsafe_function(c->tsfn, napi_tsfn_release);
    return NULL;
  }
  struct pollfd fds[2] = {{.fd = atomic_load(&c->pidfd), .events = POLLIN}, {.fd = c->out, .events = POLLIN}};
  for (;;) {
    int r = poll(fds, fds[1].fd >= 0 ? 2 : 1, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].fd >= 0 && fds[1].revents) {
      if (!drain(c)) fds[1].fd = -1; /* end of file: only the exit is left to wait for */
    }
    if (fds[0].revents) break;
  }
  siginfo_t info;
  memset(&info, 0, sizeof info);
  c->exit_code = -1;
  c->signal = 0;
  while (waitid(P_PIDFD, (id_t)atomic_load(&c->pidfd), &info, WEXITED) < 0 && errno == EINTR) {
  }
  atomic_store(&c->reaped, true);
  if (info.si_code == CLD_EXITED) c->exit_code = info.si_status;
  else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) c->signal = info.si_status;
  /* What the child wrote before it exited is in the pipe; a grandchild's later writes are not waited for. */
  drain(c);
  close(c->out);
  napi_call_threadsafe_function(c->tsfn, NULL, napi_tsfn_blocking);
  /* c stays valid until the tsfn's finalizer, which runs on the JS thread after deliver. */
  napi_release_threadsafe_function(c->tsfn, napi_tsfn_release);
  return NULL;
}

/** On the JS thread: closes the pidfd (no kill can follow: the runner stops at the result) and calls done. */
static void deliver(napi_env env, napi_value done, void *context, void *data) {
  (void)data;
  child_t *c = context;
  int pidfd = atomic_exchange(&c->pidfd, -1);
  if (pidfd >= 0) close(pidfd);
  if (env == NULL) return; /* the environment is going away */
  napi_value argv[4], undefined;
  napi_get_undefined(env, &undefined);
  if (c->spawn_error) {
    const char *name = strerrorname_np(c->spawn_error);
    napi_get_null(env, &argv[0]);
    napi_get_null(env, &argv[1]);
    napi_create_buffer_copy(env, 0, "", NULL, &argv[2]);
    napi_create_string_utf8(env, name ? name : "ESPAWN", NAPI_AUTO_LENGTH, &argv[3]);
    napi_call_function(env, undefined, done, 4, argv, NULL);
    return;
  }
  if (c->exit_code >= 0) napi_create_int32(env, c->exit_code, &argv[0]);
  else napi_get_null(env, &argv[0]);
  if (c->signal > 0) napi_create_int32(env, c->signal, &argv[1]);
  else napi_get_null(env, &argv[1]);
  napi_create_buffer_copy(env, c->len, c->len ? c->buf : "", NULL, &argv[2]);
  napi_get_undefined(env, &argv[3]);
  napi_call_function(env, undefined, done, 4, argv, NULL);
}

static void finalize_tsfn(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  child_unref(data);
}

static void finalize_handle(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  child_unref(data);
}

/** A JS array of strings as a NULL-terminated vector; NULL (and a thrown error) if it is not one. */
static char **strings(napi_env env, napi_value array) {
  uint32_t n = 0;
  if (napi_get_array_length(env, array, &n) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected an array of strings");
    return NULL;
  }
  char **v = calloc(n + 1, sizeof *v);
  if (!v) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value s;
    size_t len = 0;
    napi_get_element(env, array, i, &s);
    if (napi_get_value_string_utf8(env, s, NULL, 0, &len) != napi_ok) {
      napi_throw_type_error(env, NULL, "expected an array of strings");
      for (uint32_t j = 0; j < i; j++) free(v[j]);
      free(v);
      return NULL;
    }
    v[i] = malloc(len + 1);
    napi_get_value_string_utf8(env, s, v[i], len + 1, &len);
  }
  return v;
}

static void free_strings(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

static napi_value js_start(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "start(file, args, env, done)");
    return NULL;
  }
  size_t flen = 0;
  if (napi_get_value_string_utf8(env, argv[0], NULL, 0, &flen) != napi_ok) {
    napi_throw_type_error(env, NULL, "file must be a string");
    return NULL;
  }
  char *file = malloc(flen + 1);
  if (!file) return throw_errno(env, ENOMEM, "start");
  napi_get_value_string_utf8(env, argv[0], file, flen + 1, &flen);
  char **args = strings(env, argv[1]);
  char **envp = args ? strings(env, argv[2]) : NULL;
  napi_value result = NULL;
  int pipefd[2] = {-1, -1};
  child_t *c = NULL;
  if (!args || !envp) goto out;
  if (pipe2(pipefd, O_CLOEXEC) < 0) {
    throw_errno(env, errno, "pipe2");
    goto out;
  }
  fcntl(pipefd[0], F_SETFL, fcntl(pipefd[0], F_GETFL) | O_NONBLOCK);
  c = calloc(1, sizeof *c);
  if (!c) {
    throw_errno(env, ENOMEM, "start");
    goto out;
  }
  atomic_init(&c->refs, 2);
  atomic_init(&c->reaped, false);
  atomic_init(&c->pidfd, -1);
  atomic_init(&c->pending_signal, 0);
  c->file = file;
  c->args = args;
  c->envp = envp;
  file = NULL;
  args = envp = NULL;
  c->in = pipefd[1];
  c->out = pipefd[0];
  pipefd[0] = pipefd[1] = -1;
  napi_value name;
  napi_create_string_utf8(env, "podvol-spawn", NAPI_AUTO_LENGTH, &name);
  napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, c, finalize_tsfn, c, deliver, &c->tsfn);
  napi_create_external(env, c, finalize_handle, NULL, &result);
  pthread_attr_t ta;
  pthread_attr_init(&ta);
  pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&ta, 64 * 1024);
  /* The thread blocks every signal (it inherits this mask): a signal for the daemon is handled by libuv's
     threads as before, and the child's own mask is set by posix_spawn. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int terr = pthread_create(&t, &ta, wait_child, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&ta);
  if (terr) {
    /* No thread: nothing was started. */
    close(c->in);
    close(c->out);
    c->in = c->out = -1;
    napi_release_threadsafe_function(c->tsfn, napi_tsfn_abort); /* its finalizer drops the tsfn's reference */
    result = NULL;
    throw_errno(env, terr, "pthread_create");
  }
  c = NULL;
out:
  if (pipefd[0] >= 0) close(pipefd[0]);
  if (pipefd[1] >= 0) close(pipefd[1]);
  free(file);
  free_strings(args);
  free_strings(envp);
  return result;
}

static child_t *handle_of(napi_env env, napi_callback_info info, napi_value *argv, size_t want) {
  size_t argc = want;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  void *data = NULL;
  if (argc < want || napi_get_value_external(env, argv[0], &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "expected a handle from start()");
    return NULL;
  }
  return data;
}

static napi_value js_kill(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  child_t *c = handle_of(env, info, argv, 2);
  if (!c) return NULL;
  int32_t sig = 0;
  napi_get_value_int32(env, argv[1], &sig);
  bool sent = false;
  /* The pidfd stays open until the result is delivered on this thread, so it is this child's. */
  if (!atomic_load(&c->reaped)) {
    int pidfd = atomic_load(&c->pidfd);
    if (pidfd >= 0) {
      sent = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0;
    } else {
      /* Not started yet: the thread sends it once it has (start_child). */
      atomic_store(&c->pending_signal, sig);
      pidfd = atomic_load(&c->pidfd);
      if (pidfd >= 0) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
      sent = true;
    }
  }
  napi_value result;
  napi_get_boolean(env, sent, &result);
  return result;
}

static napi_value js_unref(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  child_t *c = handle_of(env, info, argv, 1);
  if (!c) return NULL;
  if (!atomic_load(&c->reaped)) napi_unref_threadsafe_function(env, c->tsfn);
  return NULL;
}

/** Whether this kernel has what start() needs (pidfd_open, Linux 5.3; waitid P_PIDFD, 5.4). */
static napi_value js_available(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  bool ok = fd >= 0;
  if (ok) {
    siginfo_t si;
    /* P_PIDFD is known if waitid on our own pidfd fails with ECHILD (no such child), not EINVAL. */
    ok = waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) < 0 && errno == ECHILD;
    close(fd);
  }
  napi_value result;
  napi_get_boolean(env, ok, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"start", js_start}, {"kill", js_kill}, {"unref", js_unref}, {"available", js_available}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value fn;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &fn) != napi_ok) return NULL;
    if (napi_set_named_property(env, exports, fns[i].name, fn) != napi_ok) return NULL;
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
