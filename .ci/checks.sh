#!/usr/bin/env bash
# Packaging checks with real tools, run by .ci/run after the tests:
#   bash .ci/checks.sh
# Installs what it needs from Debian and the npm registry (tools go to the
# throwaway prefix .ci/.tools, never into package.json), then checks:
# the Dockerfile, the Kubernetes manifests (and the deploy/cluster-wide
# variant) against the API schemas, the alerting rules and the Prometheus
# config, the dashboard's queries, the systemd unit (verify, its
# `systemd-analyze security` exposure, and podvol working within its
# capability bounding set), and a live scrape of a running podvol.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
node="$repo/node_modules/.bin/node"
tools="$repo/.ci/.tools"
npm_tools=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 dockerfile-utils@0.16.3)
work=$(mktemp -d)
failures=()
trap 'rm -rf "$work"' EXIT

log() { printf '\n== %s\n' "$*"; }

install_tools() {
  local missing=()
  command -v promtool >/dev/null || missing+=(prometheus)
  command -v systemd-analyze >/dev/null || missing+=(systemd)
  command -v shellcheck >/dev/null || missing+=(shellcheck)
  command -v curl >/dev/null || missing+=(curl)
  command -v unshare >/dev/null || missing+=(util-linux)
  if ((${#missing[@]} > 0)); then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    # policy-rc.d-style guard: the prometheus package must not start a server here.
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  local stamp="$tools/.installed"
  if [[ ! -f $stamp || ! -d $tools/node_modules || $(cat "$stamp") != "${npm_tools[*]}" ]]; then
    log "npm install --prefix .ci/.tools ${npm_tools[*]}"
    rm -rf "$tools"
    mkdir -p "$tools"
    npm install --prefix "$tools" --no-save --no-audit --no-fund --loglevel=error "${npm_tools[@]}" >/dev/null
    printf '%s' "${npm_tools[*]}" >"$stamp"
  fi
}

check_shell() {
  shellcheck .ci/checks.sh .ci/smoke-binary.sh .ci/run
}

check_dockerfile() {
  # A syntax and instruction linter for Dockerfiles (hadolint is in neither
  # Debian 12 nor the npm registry); test/deploy/dockerfile.test.ts pins
  # podvol's own conventions. Any diagnostic, warning or error, fails.
  local out
  out=$("$node" "$tools/node_modules/dockerfile-utils/bin/dockerfile-utils" lint --json Dockerfile) || true
  if [[ $out != "[]" ]]; then
    echo "dockerfile-utils lint Dockerfile: $out"
    return 1
  fi
  echo "Dockerfile: no diagnostics"
}

check_manifests() {
  # The opt-in variant as `kubectl apply -k deploy/cluster-wide` would build it.
  "$node" test/deploy/tools/build-variant.ts deploy/cluster-wide >"$work/cluster-wide.yaml"
  "$node" test/deploy/tools/validate-manifests.ts "$tools" \
    deploy/daemonset.yaml "$work/cluster-wide.yaml" deploy/prometheus/rbac-prometheus.yaml \
    deploy/prometheus/servicemonitor.yaml deploy/prometheus/prometheusrule.yaml
}

check_rules() {
  promtool check rules deploy/prometheus/alerts.yaml
  promtool test rules deploy/prometheus/alerts.test.yaml
  # check config insists that the TLS files it names exist: point them at
  # placeholders, as check_systemd points ExecStart at this checkout's Node.
  mkdir -p "$work/prometheus/podvol"
  touch "$work/prometheus/podvol/"{ca.crt,client.crt,client.key}
  cp deploy/prometheus/alerts.yaml "$work/prometheus/"
  sed "s|/etc/prometheus/podvol/|$work/prometheus/podvol/|" deploy/prometheus/prometheus.yml \
    >"$work/prometheus/prometheus.yml"
  promtool check config "$work/prometheus/prometheus.yml"
}

check_dashboard() {
  # Every panel query, with Grafana's variables filled in, must parse as
  # PromQL. (Metric names are held to metrics.json by test/deploy.)
  "$node" test/deploy/tools/dashboard-rules.ts >"$work/dashboard-rules.yaml"
  promtool check rules "$work/dashboard-rules.yaml"
}

check_systemd() {
  # verify insists that ExecStart's binary exists: point it at the single
  # executable the unit runs (built here when it is not there yet).
  [[ -x dist/podvol ]] || npm run --silent build:binary >/dev/null
  mkdir -p "$work/unit"
  sed "s|^ExecStart=/usr/local/bin/podvol |ExecStart=$repo/dist/podvol |" deploy/systemd/podvol.service \
    >"$work/unit/podvol.service"
  local out
  out=$(systemd-analyze verify --man=no "$work/unit/podvol.service" 2>&1) || {
    echo "$out"
    return 1
  }
  # verify exits 0 on unknown keys and bad values, it only warns: any output fails.
  if [[ -n $out ]]; then
    echo "$out"
    return 1
  fi
  echo "podvol.service: systemd-analyze verify clean"
  # The exposure score of the hardening (lower is better; 9.6 without it).
  # --threshold fails the check when a change makes it worse than 5.0.
  systemd-analyze security --offline=true --threshold=50 --no-pager "$work/unit/podvol.service"
}

podvol_ready() {
  local url=$1 pid=$2
  for _ in $(seq 1 120); do
    curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# Runs podvol on the examples under a capability bounding set (setpriv syntax,
# e.g. -all,+sys_admin) with no_new_privs, as the unit does; prints the states
# of the example volumes, one per line.
volume_states_with_caps() {
  local caps=$1 root port url
  root=$(mktemp -d "$work/caps.XXXXXX")
  port=$((20000 + RANDOM % 20000))
  url="http://127.0.0.1:$port"
  unshare --mount --propagation private -- \
    setpriv --no-new-privs --bounding-set="$caps" -- \
    "$node" bin/podvol.js run --pod-manifest-path examples --root-dir "$root" \
    --listen "127.0.0.1:$port" --node-name podvol-caps >"$root.log" 2>&1 &
  pid=$!
  trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
  if ! podvol_ready "$url" "$pid"; then
    echo "podvol did not become ready under bounding set $caps; its log:" >&2
    cat "$root.log" >&2
    return 1
  fi
  # Give failing mounts their first attempt, then read the states.
  sleep 3
  curl -fsS "$url/status" | "$node" -e \
    'let t="";process.stdin.on("data",d=>t+=d).on("end",()=>{for(const p of JSON.parse(t).pods)for(const v of p.volumes)console.log(v.state)})'
  kill -TERM "$pid"
  wait "$pid"
}

check_unit_capabilities() {
  # podvol must set up every example volume with only the capabilities the
  # unit's CapabilityBoundingSet= leaves it, and must fail without
  # CAP_SYS_ADMIN (so this check can tell).
  local caps list=-all c states
  caps=$(sed -n 's/^CapabilityBoundingSet=//p' deploy/systemd/podvol.service)
  if [[ -z $caps ]]; then
    echo "podvol.service has no CapabilityBoundingSet="
    return 1
  fi
  for c in $caps; do
    c=${c#CAP_}
    list+=",+${c,,}"
  done
  states=$(volume_states_with_caps "$list")
  if [[ -z $states ]] || grep -vqx mounted <<<"$states"; then
    echo "with bounding set $list the example volumes are: $(tr '\n' ' ' <<<"$states")"
    return 1
  fi
  echo "every example volume mounted within the unit's bounding set ($list)"
  states=$(volume_states_with_caps "${list/,+sys_admin/}")
  if ! grep -vqx mounted <<<"$states"; then
    echo "without CAP_SYS_ADMIN every volume still mounted: the check cannot fail"
    return 1
  fi
  echo "without CAP_SYS_ADMIN some fail, as they must: $(tr '\n' ' ' <<<"$states")"
}

# prom-client's default metrics include three gauges whose names end in
# _total; promtool's lint rightly flags them, but they are not podvol's to
# rename. Everything else promtool says fails the check.
prom_client_lint='^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$'

check_exposition() {
  local file=$1 out status=0
  out=$(promtool check metrics <"$file" 2>&1) || status=$?
  local rest
  rest=$(grep -Ev "$prom_client_lint" <<<"$out" || true)
  # 3 is promtool's "lint problems found"; any other failure is a parse error.
  if [[ -n $rest ]] || ((status != 0 && status != 3)); then
    echo "promtool check metrics (exit $status):"
    echo "$out"
    return 1
  fi
  echo "promtool check metrics: clean (apart from prom-client's nodejs_active_*_total gauges)"
  "$node" test/deploy/tools/check-exposition.ts <"$file"
}

check_sample_exposition() {
  # The hand-written sample in test/deploy/fixtures keeps the tooling honest
  # even where podvol cannot run.
  check_exposition test/deploy/fixtures/sample-metrics.txt
}

check_live_scrape() {
  if [[ ! -f bin/podvol.js ]]; then
    echo "bin/podvol.js does not exist: cannot start podvol for a live scrape"
    return 1
  fi
  local port=$((20000 + RANDOM % 20000))
  local url="http://127.0.0.1:$port"
  mkdir -p "$work/root"
  # A private mount namespace, so whatever podvol mounts vanishes with it.
  unshare --mount --propagation private -- \
    "$node" bin/podvol.js run --pod-manifest-path examples --root-dir "$work/root" \
    --listen "127.0.0.1:$port" --node-name podvol-ci >"$work/podvol.log" 2>&1 &
  # Global, not local: the EXIT trap of this check's subshell (see run) needs
  # it to make sure podvol goes with the subshell.
  pid=$!
  trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
  local ready=
  for _ in $(seq 1 60); do
    if curl -fsS -o /dev/null "$url/readyz" 2>/dev/null; then
      ready=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if [[ -z $ready ]]; then
    echo "podvol did not become ready on $url/readyz within 30 s; its log:"
    cat "$work/podvol.log"
    return 1
  fi
  curl -fsS "$url/metrics" >"$work/metrics.txt"
  check_exposition "$work/metrics.txt"
  # podvol must stop cleanly on SIGTERM (unshare execs it, so it gets the signal).
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "podvol exited with status $status after SIGTERM; its log:"
    cat "$work/podvol.log"
    return 1
  fi
  echo "live scrape checked; podvol stopped cleanly on SIGTERM"
}

# Each check runs in a subshell with errexit on. (Calling it from an if or
# with || would silently switch errexit off inside it.)
run() {
  log "$1"
  local status=0
  set +e
  (
    set -e
    "$1"
  )
  status=$?
  set -e
  if ((status != 0)); then failures+=("$1"); fi
}

install_tools
run check_shell
run check_dockerfile
run check_manifests
run check_rules
run check_dashboard
run check_systemd
run check_unit_capabilities
run check_sample_exposition
run check_live_scrape

if ((${#failures[@]} > 0)); then
  printf '\npackaging checks failed: %s\n' "${failures[*]}"
  exit 1
fi
printf '\npackaging checks passed\n'
