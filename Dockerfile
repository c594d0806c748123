# syntax=docker/dockerfile:1
# podvol node agent image.
#
# podvol runs its TypeScript sources directly (Node 24 strips types at load
# time), so there is no compiled output to carry between stages. The build
# stage exists to (1) gate the image on a clean type-check with the dev
# toolchain and (2) produce a node_modules with production dependencies only.
# The runtime stage copies exactly that: sources, bin/ and pruned modules.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV NODE_ENV=development
COPY package.json package-lock.json ./
# --ignore-scripts: nothing here needs an install script (typescript and biome
# ship native binaries as optional dependencies), and the "node" dev
# dependency would only fetch a second Node the base image already has.
RUN npm ci --ignore-scripts --no-audit --no-fund
# The runtime socket's peer-credential check (native/peercred), the
# one-syscall safe path resolution (native/openat2), the mount table's
# change signal (native/mountwatch), the listeners' socket queues under a
# connection flood (native/sockq), malloc_trim for the memory give-back
# (native/malloctrim) and posix_spawn for mount/umount (native/spawn) are
# small Node-API addons;
# scripts are off above, so they are built here, explicitly.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY scripts/build-native.mjs scripts/
COPY native/peercred/peercred.c native/peercred/
COPY native/openat2/openat2.c native/openat2/
COPY native/mountwatch/mountwatch.c native/mountwatch/
COPY native/sockq/sockq.c native/sockq/
COPY native/malloctrim/malloctrim.c native/malloctrim/
COPY native/spawn/spawn.c native/spawn/
RUN node scripts/build-native.mjs && test -f native/peercred/build/peercred.node \
 && test -f native/openat2/build/openat2.node && test -f native/mountwatch/build/mountwatch.node \
 && test -f native/sockq/build/sockq.node && test -f native/malloctrim/build/malloctrim.node \
 && test -f native/spawn/build/spawn.node
COPY tsconfig.json ./
COPY bin/ bin/
COPY src/ src/
COPY scripts/build-bundle.mjs scripts/
# dist/bundle: what bin/podvol.js runs (start-up and memory, README Performance).
RUN npx tsc --noEmit -p tsconfig.json \
 && node scripts/build-bundle.mjs \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
# util-linux mount/umount (the "mount" package), not busybox: podvol passes
# util-linux options such as --no-canonicalize. tini is PID 1 so SIGTERM
# reaches podvol and the mount helpers it forks are reaped.
# The package managers of the base image are not needed at run time (the
# modules come from the build stage): npm, npx, corepack and yarn go, so a
# compromised agent cannot fetch and run code with them. podvol runs as root,
# so no setuid or setgid bit is needed either: they are cleared.
# /usr/local/bin/podvol puts the CLI on the image's PATH, so
# `kubectl exec ... -- podvol status` (or drain, plan) works as on bare metal.
RUN apt-get update \
 && apt-get install -y --no-install-recommends mount tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /opt/yarn-v* \
    /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg \
 && find / -xdev -type f -perm /6000 -exec chmod a-s {} + \
 && ln -s /app/bin/podvol.js /usr/local/bin/podvol
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/bin/ bin/
COPY --from=build /app/src/ src/
COPY --from=build /app/dist/bundle/ dist/bundle/
COPY --from=build /app/native/peercred/build/ native/peercred/build/
COPY --from=build /app/native/openat2/build/ native/openat2/build/
COPY --from=build /app/native/mountwatch/build/ native/mountwatch/build/
COPY --from=build /app/native/sockq/build/ native/sockq/build/
COPY --from=build /app/native/malloctrim/build/ native/malloctrim/build/
# Root on purpose: mounting needs CAP_SYS_ADMIN in the host mount namespace;
# the DaemonSet runs this image privileged.
USER root
EXPOSE 10280
# Exec form, no shell and no npm in between, so signals are not swallowed.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/podvol.js", "run"]
