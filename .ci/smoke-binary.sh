#!/usr/bin/env bash
# Standalone smoke test of the single executable (npm run build:binary), run
# by .ci/run on a machine whose own Node is 20: the executable must need
# nothing but itself. PATH holds only the system directories, so neither the
# checkout's Node 24 nor npm is reachable; node_modules and src are not used.
#
#   bash .ci/smoke-binary.sh [dist/podvol]
#
# It checks `podvol version`, then in a private mount namespace: `podvol run`
# on a static pod file (a tmpfs emptyDir and a downwardAPI volume), /readyz,
# the files and mounts, `podvol status`, `podvol plan`, a second `podvol run`
# refused by the root-dir lock, SIGTERM leaving the mounts, and `podvol drain`
# taking everything down.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=$(readlink -f "${1:-dist/podvol}")
if [[ ! -x $bin ]]; then
  echo "smoke: $bin does not exist; build it with: npm run build:binary"
  exit 1
fi
if [[ ${PODVOL_SMOKE_INNER:-} != 1 ]]; then
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  echo "smoke: system node: $(command -v node >/dev/null && node --version || echo none)"
  version=$("$bin" version)
  echo "smoke: $version"
  [[ $version =~ ^podvol\ [0-9.]+\ \(node\ v24\. ]] || {
    echo "smoke: podvol version printed: $version"
    exit 1
  }
  # Everything else in a private mount namespace: the test's mounts vanish with it.
  exec unshare --mount --propagation private -- env PODVOL_SMOKE_INNER=1 bash "${BASH_SOURCE[0]}" "$bin"
fi

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
  # Inside the private namespace: detach whatever is left, then remove the directory.
  grep -o " $work/[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "smoke: FAILED: $*"
  [[ -f $work/podvol.log ]] && cat "$work/podvol.log"
  exit 1
}

root=$work/root
cat >"$work/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: smoke
spec:
  containers:
    - name: app
      image: busybox
      volumeMounts:
        - { name: cache, mountPath: /cache }
        - { name: info, mountPath: /info }
  volumes:
    - name: cache
      emptyDir: { medium: Memory, sizeLimit: 8Mi }
    - name: info
      downwardAPI:
        items:
          - { path: name, fieldRef: { fieldPath: metadata.name } }
YAML

port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
"$bin" run --pod-manifest-path "$work/pod.yaml" --root-dir "$root" --listen "127.0.0.1:$port" \
  --node-name smoke-node --log-format json --runtime-socket "$work/runtime.sock" >"$work/podvol.log" 2>&1 &
pid=$!
ready=
for _ in $(seq 1 120); do
  if [[ $(curl -fsS "$url/status" 2>/dev/null | grep -c '"state": *"mounted"') == 2 ]]; then
    ready=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || fail "podvol run exited"
  sleep 0.5
done
[[ -n $ready ]] || fail "the smoke pod's volumes were not mounted within 60 s: $(curl -sS "$url/status" || true)"
curl -fsS "$url/readyz" >/dev/null || fail "/readyz is not 200"

pods=$(echo "$root"/pods/*)
[[ $(cat "$pods/volumes/kubernetes.io~downward-api/info/name") == smoke-smoke-node ]] || fail "downwardAPI file"
grep -q " $pods/volumes/kubernetes.io~empty-dir/cache .* - tmpfs " /proc/self/mountinfo || fail "tmpfs emptyDir not mounted"
"$bin" status --server "$url" | grep -q '^default *smoke-smoke-node *cache *kubernetes.io/empty-dir *mounted' ||
  fail "podvol status: $("$bin" status --server "$url")"
# The plan starts from this host's mount table: against the running daemon's root everything is
# already mounted and nothing would be; a fresh root directory plans the mounts.
"$bin" plan -f "$work/pod.yaml" --root-dir "$work/plan-root" --node-name smoke-node | grep -q 'mount -t tmpfs' ||
  fail "podvol plan"
[[ ! -e $work/plan-root ]] || fail "podvol plan created its root directory"

second=0
"$bin" run --pod-manifest-path "$work/pod.yaml" --root-dir "$root" --listen 127.0.0.1:0 --runtime-socket '' \
  2>"$work/second.err" || second=$?
if [[ $second != 1 ]] || ! grep -q "in use by another podvol (pid $pid, podvol run)" "$work/second.err"; then
  fail "a second podvol run on the same root: exit $second, $(cat "$work/second.err")"
fi

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status == 0 ]] || fail "podvol run exited $status on SIGTERM"
grep -q " $root/" /proc/self/mountinfo || fail "stopping unmounted the volumes"

"$bin" drain --root-dir "$root" >"$work/drain.out" || fail "podvol drain: $(cat "$work/drain.out")"
grep -q '^drained: 2 volumes torn down, 1 pod directories removed$' "$work/drain.out" || fail "drain: $(cat "$work/drain.out")"
if grep -q " $root/" /proc/self/mountinfo; then fail "mounts left after drain"; fi
echo "smoke: passed ($("$bin" version))"
