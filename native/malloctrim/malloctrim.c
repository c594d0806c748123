// malloc_trim(3) for the memory give-back (src/agent/give-back.ts). After a big
// teardown, glibc's malloc keeps the native memory freed by the pods' work (in
// the main arena's brk heap and in the arenas of libuv's and the worker's
// threads) rather than returning it: measured after 300 pods × 4 volumes were
// torn down, 32 MiB of RSS that one malloc_trim(0) gave back. trim() returns
// whether memory was released; false also where the C library is not glibc
// (musl has no malloc_trim and returns freed memory by itself).
#define NAPI_VERSION 8
#include <node_api.h>
#include <stdbool.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static napi_value js_trim(napi_env env, napi_callback_info info) {
  (void)info;
  bool released = false;
#ifdef __GLIBC__
  // 0: keep no padding at the top of the heap; glibc also releases whole free pages inside every arena.
  released = malloc_trim(0) == 1;
#endif
  napi_value result;
  napi_get_boolean(env, released, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, js_trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
